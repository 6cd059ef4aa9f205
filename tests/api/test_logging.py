import json
import logging

from api.logs import JsonFormatter


def test_log_lines_are_json_with_extras() -> None:
    record = logging.LogRecord("flokit.api", logging.INFO, __file__, 1, "request", None, None)
    record.request_id = "req_1"
    record.status = 200
    line = json.loads(JsonFormatter().format(record))
    assert line["msg"] == "request" and line["level"] == "info"
    assert line["request_id"] == "req_1" and line["status"] == 200
    assert line["ts"].endswith("Z")
