import sys

sys.path[:0] = ["/work/main", "/work/main/functions"]
from tests.conftest import *  # noqa: E402, F403  fixtures and hooks, after the path is set
