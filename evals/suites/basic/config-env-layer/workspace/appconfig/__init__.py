"""Load a two-level (section -> key) configuration with typed values."""

from appconfig.loader import load_config
from appconfig.schema import ConfigError

__all__ = ["ConfigError", "load_config"]
