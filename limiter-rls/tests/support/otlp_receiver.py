"""A minimal OTLP/gRPC trace receiver for limiter-rls's tests/traces.rs.

Built from PyPI's opentelemetry-proto and grpcio. Binds 127.0.0.1 on a free
port, prints the port on its first line, and appends one JSON line per span
received to the file named by its argument: ids in hex, the name, the
resource's, the span's and each event's attributes as plain values.
"""
import json
import sys
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import (
    trace_service_pb2,
    trace_service_pb2_grpc,
)


def value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def attrs(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, path):
        self.path = path

    def Export(self, request, context):
        with open(self.path, "a", encoding="utf-8") as out:
            for rs in request.resource_spans:
                resource = attrs(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        out.write(json.dumps({
                            "trace_id": s.trace_id.hex(),
                            "span_id": s.span_id.hex(),
                            "parent_span_id": s.parent_span_id.hex(),
                            "name": s.name,
                            "kind": s.kind,
                            "resource": resource,
                            "attributes": attrs(s.attributes),
                            "events": [
                                {"name": e.name, "attributes": attrs(e.attributes)}
                                for e in s.events
                            ],
                        }) + "\n")
        return trace_service_pb2.ExportTraceServiceResponse()


def main():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Receiver(sys.argv[1]), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
