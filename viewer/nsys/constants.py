"""Facts of the Nsight Systems SQLite export (schema 3.x) that the reader and the test fixture share."""

# NVTX_EVENTS.eventType values
NVTX_CATEGORY = 33      # nvtxDomainNameCategory: text = category name, category = its id
NVTX_MARK = 34
NVTX_PUSHPOP = 59       # push/pop range (same thread)
NVTX_STARTEND = 60      # start/end range (may end on another thread)
NVTX_DOMAIN_CREATE = 75  # text = domain name, domainId = its id
NVTX_RANGE_TYPES = (NVTX_PUSHPOP, NVTX_STARTEND)

# tables
T_STRINGS = "StringIds"
T_NVTX = "NVTX_EVENTS"
T_KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
T_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
T_SESSION = "TARGET_INFO_SESSION_START_TIME"
T_META_EXPORT = "META_DATA_EXPORT"

# what the overlay cannot work without; the rest is optional
REQUIRED_TABLES = (T_STRINGS, T_NVTX, T_SESSION)

RINGSCOPE_DOMAIN = "ringscope"
SQLITE_MAGIC = b"SQLite format 3\x00"


def pid_of(global_tid: int) -> int:
    """OS process id inside a serialized globalTid/globalPid."""
    return (int(global_tid) >> 24) & 0xFFFFFF


def tid_of(global_tid: int) -> int:
    """OS thread id inside a serialized globalTid."""
    return int(global_tid) & 0xFFFFFF
