//! The numbers of each algorithm, checked by building the core limiter
//! they describe on a `ManualClock`.

#[allow(unused_imports)]
use super::*;

impl<'n> Fields<'_, '_, 'n> {
    pub(super) fn algorithm(&mut self, name: &str) -> Option<Algorithm> {
        match name {
            "token_bucket" => self
                .quota()
                .map(|(rate, quota)| Algorithm::TokenBucket { rate, quota }),
            "leaky_bucket" => self
                .quota()
                .map(|(rate, quota)| Algorithm::LeakyBucket { rate, quota }),
            "sliding_window" => {
                let limit = self
                    .required("limit")
                    .and_then(|n| self.positive(n, "limit"));
                let window = self.required("window").and(self.duration("window"));
                let limit = match u32::try_from(limit?) {
                    Ok(l) => l,
                    Err(_) => {
                        let pos = self.t.get("limit").map_or(self.t.pos, |n| n.pos);
                        self.err(pos, "limit", too_large());
                        return None;
                    }
                };
                let (window, _) = window??;
                if let Err(e) = SlidingWindow::with_clock(limit, window, ManualClock::new()) {
                    self.core_error("window", e);
                    return None;
                }
                Some(Algorithm::SlidingWindow { limit, window })
            }
            "warm_up" => {
                let quota = self.quota();
                let warm_up = self.required("warm_up").and(self.duration("warm_up"));
                let cold_factor = match self.t.get("cold_factor") {
                    None => Some(3.0),
                    Some(n) => self.number(n, "cold_factor"),
                };
                let ((rate, quota), (warm_up, _), cold_factor) = (quota?, warm_up??, cold_factor?);
                let built = WarmUpBuilder::with_clock(quota, warm_up, ManualClock::new())
                    .cold_factor(cold_factor)
                    .build();
                if let Err(e) = built {
                    let field = match e {
                        limiter_core::QuotaError::InvalidParameter { name, .. }
                            if name.contains("cold") =>
                        {
                            "cold_factor"
                        }
                        _ => "warm_up",
                    };
                    self.core_error(field, e);
                    return None;
                }
                Some(Algorithm::WarmUp {
                    rate,
                    quota,
                    warm_up,
                    cold_factor,
                })
            }
            "adaptive" => self.adaptive(),
            "priority" => self.priority(),
            _ => None,
        }
    }

    pub(super) fn adaptive(&mut self) -> Option<Algorithm> {
        let target = self
            .required("target_latency")
            .and(self.duration("target_latency"));
        let policy = match self.t.get("policy") {
            None => Some("ewma_aimd"),
            Some(n) => match self.string(n, "policy") {
                Some(p @ ("ewma_aimd" | "percentile")) => Some(p),
                Some(other) => {
                    let problem = Problem::InvalidValue {
                        reason: format!("unknown adaptive policy `{other}`"),
                        expected: "ewma_aimd or percentile".into(),
                    };
                    self.err(n.pos, "policy", problem);
                    None
                }
                None => None,
            },
        };
        let min = self.rate("min_rate");
        let max = self.rate("max_rate");
        let burst = self.u32_field("burst");
        let ((target, _), policy, min, max, burst) = (target??, policy?, min?, max?, burst?);
        let burst = burst.unwrap_or(1);
        let (min_rate, max_rate) = (min.per_second(), max.per_second());
        let clock = ManualClock::new();
        let built = match policy {
            "percentile" => AdaptiveLimiter::builder(PercentileWindow::with_threshold(target))
                .clock(clock)
                .min_rate(min_rate)
                .max_rate(max_rate)
                .burst(burst)
                .build()
                .map(|_| ()),
            _ => AdaptiveLimiter::builder(EwmaAimd::new(target))
                .clock(clock)
                .min_rate(min_rate)
                .max_rate(max_rate)
                .burst(burst)
                .build()
                .map(|_| ()),
        };
        if let Err(e) = built {
            self.core_error("min_rate", e);
            return None;
        }
        let policy = if policy == "percentile" {
            AdaptivePolicySpec::Percentile { target }
        } else {
            AdaptivePolicySpec::EwmaAimd { target }
        };
        Some(Algorithm::Adaptive {
            policy,
            min_rate,
            max_rate,
            burst,
        })
    }

    pub(super) fn priority(&mut self) -> Option<Algorithm> {
        let quota = self.quota();
        let n = self.required("classes")?;
        let Value::Map(entries) = &n.value else {
            self.err(
                n.pos,
                "classes",
                wrong("a table of class names to shares", &n.value),
            );
            return None;
        };
        let mut classes = Vec::new();
        for (name, _, share) in entries {
            let field = format!("classes.{name}");
            classes.push((name.clone(), self.number(share, &field)?));
        }
        let class_header = match self.t.get("class_header") {
            None => Some(None),
            Some(n) => {
                self.string(n, "class_header")
                    .and_then(|h| match HeaderName::try_from(h.trim()) {
                        Ok(h) => Some(Some(h)),
                        Err(_) => {
                            let problem = Problem::InvalidValue {
                                reason: format!("`{h}` is not a valid header name"),
                                expected: "a header name such as x-priority".into(),
                            };
                            self.err(n.pos, "class_header", problem);
                            None
                        }
                    })
            }
        };
        let ((rate, quota), class_header) = (quota?, class_header?);
        let shares: Vec<f64> = classes.iter().map(|(_, s)| *s).collect();
        if let Err(e) = PriorityLimiter::with_clock(quota, &shares, ManualClock::new()) {
            self.core_error("classes", e);
            return None;
        }
        Some(Algorithm::Priority {
            rate,
            quota,
            classes,
            class_header,
        })
    }
}
