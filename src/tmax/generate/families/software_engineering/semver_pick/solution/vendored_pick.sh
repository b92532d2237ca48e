#!/bin/bash
# Pick versions with the vendored semverlite: `pick INDEX` reads requirements on stdin.
PYTHONPATH=/app/vendor exec python3 -m semverlite pick "$1"
