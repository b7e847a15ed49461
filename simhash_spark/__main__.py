import sys

from simhash_spark.cli import main

sys.exit(main())
