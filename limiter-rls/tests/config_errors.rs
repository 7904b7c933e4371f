//! Every config problem envoyproxy/ratelimit rejects, rejected here with
//! the file, line and column and a fix; several files and domains.

use std::path::PathBuf;

use limiter_rls::{Problem, RuleSet};

fn errors(files: &[(&str, &str)]) -> Vec<(String, u32, u32, Problem)> {
    let files = files
        .iter()
        .map(|(n, t)| (PathBuf::from(n), (*t).to_owned()))
        .collect();
    RuleSet::from_files(files)
        .unwrap_err()
        .errors()
        .iter()
        .map(|e| {
            (
                e.file.display().to_string(),
                e.pos.line,
                e.pos.column,
                e.problem.clone(),
            )
        })
        .collect()
}

#[test]
fn unknown_fields_wrong_units_and_unlimited_with_a_unit() {
    let got = errors(&[(
        "a.yaml",
        "domain: d
descriptors:
  - key: k
    rate_limt: {unit: second}
  - key: k2
    rate_limit:
      unit: fortnight
      requests_per_unit: 1
  - key: k3
    rate_limit: {unlimited: true, unit: second}
  - key: k4
    rate_limit: {unit: second, requests_per_unit: -1}
",
    )]);
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!((got[0].1, got[0].2), (4, 5));
    assert!(matches!(&got[0].3, Problem::UnknownField { found, .. } if found == "rate_limt"));
    assert_eq!((got[1].1, got[1].2), (7, 13));
    assert_eq!(
        got[1].3,
        Problem::InvalidUnit {
            found: "fortnight".into()
        }
    );
    assert_eq!(got[2].3, Problem::UnitWithUnlimited);
    assert_eq!(got[3].3, Problem::RequestsOutOfRange { found: -1 });
}

#[test]
fn duplicates_like_theirs() {
    let got = errors(&[(
        "a.yaml",
        "domain: d
descriptors:
  - key: k
    value: v
  - key: k
    value: v
",
    )]);
    assert_eq!(
        got[0].3,
        Problem::DuplicateDescriptor {
            composite: "d.k_v".into()
        }
    );
    assert_eq!((got[0].1, got[0].2), (5, 5));

    let got = errors(&[("a.yaml", "domain: d\n"), ("b.yaml", "domain: d\n")]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "b.yaml");
    assert_eq!(
        got[0].3,
        Problem::DuplicateDomain {
            domain: "d".into(),
            first: "a.yaml".into()
        }
    );
}

#[test]
fn empty_domain_key_replaces_and_syntax() {
    let got = errors(&[("a.yaml", "descriptors: []\n")]);
    assert_eq!(got[0].3, Problem::EmptyDomain);
    let got = errors(&[(
        "a.yaml",
        "domain: d
descriptors:
  - value: v
  - key: k
    rate_limit:
      unit: second
      name: me
      replaces: [{name: me}, {}]
",
    )]);
    assert_eq!(got[0].3, Problem::EmptyKey);
    assert_eq!(got[1].3, Problem::ReplacesItself { name: "me".into() });
    assert_eq!(got[2].3, Problem::EmptyReplaces);
    let got = errors(&[("a.yaml", "domain: d\ndescriptors: [\n")]);
    assert!(matches!(got[0].3, Problem::Syntax { .. }));
}

#[test]
fn messages_name_the_place_and_the_fix() {
    let e = RuleSet::from_files(vec![(
        "conf/a.yaml".into(),
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: sec}\n".into(),
    )])
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "conf/a.yaml:4:24: invalid rate limit unit 'sec'; fix: use second, minute, hour, day, week, month or year"
    );
}

#[test]
fn a_directory_with_several_files_and_domains_and_a_configmap_layout() {
    let dir = std::env::temp_dir().join(format!("rls-cfg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("..2026_01_01");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("a.yaml"), "domain: one\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n").unwrap();
    std::fs::write(data.join("b.yml"), "domain: two\n").unwrap();
    std::fs::write(data.join("notes.txt"), "not config").unwrap();
    std::os::unix::fs::symlink("..2026_01_01", dir.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/a.yaml", dir.join("a.yaml")).unwrap();
    std::os::unix::fs::symlink("..data/b.yml", dir.join("b.yml")).unwrap();
    let set = RuleSet::load_dir(&dir).unwrap();
    let mut domains: Vec<_> = set.domains().collect();
    domains.sort_unstable();
    assert_eq!(domains, ["one", "two"]);
    assert_eq!(set.files().len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}
