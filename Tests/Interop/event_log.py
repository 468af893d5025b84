"""The JSON-lines event log the interop servers and proxies write, one object per event."""

import json
import time


class EventLog:
    """Appends {"event": ..., **fields, "t": seconds} lines to `path`, flushed at once (a test
    reads the file while the process runs); does nothing without a path."""

    def __init__(self, path):
        self.file = open(path, "a", encoding="utf-8") if path else None

    def __call__(self, event, **fields):
        if self.file:
            self.file.write(json.dumps({"event": event, **fields, "t": time.time()}) + "\n")
            self.file.flush()
