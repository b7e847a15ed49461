"""Every column name the job reads or writes, in one place."""

# documents/
ID = "id"
TEXT = "text"  # internal: the configured text columns joined with newlines
FINGERPRINT = "fingerprint"
FINGERPRINT_HEX = "fingerprint_hex"
STATUS = "status"
N_CHARS = "n_chars"
CLUSTER_ID = "cluster_id"
CLUSTER_SIZE = "cluster_size"
IS_DUPLICATE = "is_duplicate"

# pairs/
ID_A = "id_a"
ID_B = "id_b"
DISTANCE = "distance"
SIMILARITY = "similarity"  # the second-tier measure, null where not checked
REASON = "reason"  # why the pair is a duplicate (simhash_spark.core.verify)

# clusters/
SIZE = "size"
MEMBER_IDS = "member_ids"

# internal: the title tier
TITLE = "title_text"  # the configured title column
TITLE_FINGERPRINT = "title_fingerprint"

# internal: band join and connected components
TEXT_HASH = "text_hash"  # xxhash64 of the text: identical-fingerprint groups split by text when verifying
CHECK_SUMMARY = "check_summary"  # binary: what the text check filters pairs with (core.check_filter)
SHARES_BAND = "shares_band"  # boolean: a candidate pair's sketches share a band (core.sketch_bands)
MAY_PASS = "may_pass"  # boolean: a candidate pair may pass the text check (core.check_filter)
BAND = "band"  # the band (LSH table) a key belongs to
KEY = "band_key"
SRC = "src"
DST = "dst"
NODE = "node"
COMPONENT = "component"

# incremental runs: documents/ gets matched_index_id; the index stores these
MATCHED_INDEX_ID = "matched_index_id"  # the earliest indexed document in the batch document's component
RUN_DATE = "run_date"
KEY_TABLE = "key_table"  # index key rows: which table (core.index_keys); the folder keys/key_table=T
INDEX_KEY = "key"  # index key rows: the key a probe meets (core.index_keys)
BUCKET_SIZE = "bucket_size"  # fingerprints sharing one band key (hot-bucket detection)
FLOOD_GROUP = "flood_group"  # the hot buckets' members, gathered into one task (transforms.hot_buckets)

# Columns the job adds to documents/: pass-through columns must not reuse these names.
RESERVED = (
    ID,
    FINGERPRINT,
    FINGERPRINT_HEX,
    STATUS,
    N_CHARS,
    CLUSTER_ID,
    CLUSTER_SIZE,
    IS_DUPLICATE,
    MATCHED_INDEX_ID,
)

# Names pass-through columns may not take: the output's columns and the job's internal ones.
NOT_PASSTHROUGH = (*RESERVED, TEXT, TITLE, TITLE_FINGERPRINT, TEXT_HASH, RUN_DATE)

# What a run writes into OUTPUT: its data folders, then its files. --overwrite replaces a folder that holds
# these names only.
OUTPUTS = ("documents", "pairs", "clusters", "deduplicated")
OUTPUT_FILES = ("_SUCCESS", "summary.json", "report.html")
