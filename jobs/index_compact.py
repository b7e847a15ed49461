"""spark-submit entry point: ``spark-submit [spark options] jobs/index_compact.py INDEX [--keep-recent N] [...]``."""

import sys

from simhash_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["index", "compact", *sys.argv[1:]]))
