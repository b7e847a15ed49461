"""spark-submit entry point: ``spark-submit [spark options] jobs/dedup.py --input IN --output OUT [...]``."""

import sys

from simhash_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["dedup", *sys.argv[1:]]))
