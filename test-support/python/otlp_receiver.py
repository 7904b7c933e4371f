"""A minimal OTLP trace receiver for the workspace's trace tests.

Built from PyPI's opentelemetry-proto and grpcio. Serves OTLP/gRPC (the
TraceService) and OTLP/HTTP with protobuf bodies (POST /v1/traces), both on
127.0.0.1 on free ports, prints "GRPC_PORT HTTP_PORT" on its first line, and
appends one JSON line per span received to the file named by its argument:
the protocol it came by, ids in hex, the name, the kind, the resource's,
the span's and each event's attributes as plain values.
"""
import json
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from opentelemetry.proto.collector.trace.v1 import (
    trace_service_pb2,
    trace_service_pb2_grpc,
)

LOCK = threading.Lock()


def value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def attrs(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


def record(path, request, protocol):
    with LOCK, open(path, "a", encoding="utf-8") as out:
        for rs in request.resource_spans:
            resource = attrs(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    out.write(json.dumps({
                        "protocol": protocol,
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


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, path):
        self.path = path

    def Export(self, request, context):
        record(self.path, request, "grpc")
        return trace_service_pb2.ExportTraceServiceResponse()


def http_handler(path):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path != "/v1/traces" or \
                    self.headers.get("Content-Type") != "application/x-protobuf":
                self.send_response(404 if self.path != "/v1/traces" else 415)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            record(path, request, "http")
            answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    return Handler


def main():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Receiver(sys.argv[1]), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    web = ThreadingHTTPServer(("127.0.0.1", 0), http_handler(sys.argv[1]))
    threading.Thread(target=web.serve_forever, daemon=True).start()
    print(port, web.server_address[1], flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
