import sys

sys.path[:0] = ["/work/main", "/work/main/functions"]
from tests.conftest import *  # noqa: F403  fixtures and hooks
