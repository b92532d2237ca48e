{{ oracle }}
import io
import json
import os
import re
import sys

# Usage: tojson.py OUT_DIR CSV... -> OUT_DIR/STEM.json for every STEM.csv
for path in sys.argv[2:]:
    with open(path, encoding="utf-8") as handle:
        records = as_records(handle.read())
    stem = os.path.basename(path)[: -len(".csv")]
    with open(os.path.join(sys.argv[1], stem + ".json"), "w", encoding="utf-8") as out:
        json.dump(records, out, ensure_ascii=False, indent=1)
