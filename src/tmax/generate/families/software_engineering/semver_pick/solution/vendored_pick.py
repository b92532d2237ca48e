#!/usr/bin/env python3
"""Pick versions with the vendored semverlite: `pick INDEX` reads requirements on stdin."""
import sys

sys.path.insert(0, "/app/vendor")
from semverlite.__main__ import main  # noqa: E402

sys.exit(main([sys.argv[0], "pick", sys.argv[1]]))
