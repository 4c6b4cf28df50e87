"""The cockpit's TOML config: the schema (`schema`), where each key sits in the text
(`toml_lines`), and the reader that checks one against the other (`reader`)."""

from cockpit.config.reader import find_config_path, load, parse
from cockpit.config.schema import (
    DEFAULT_CONCURRENCY,
    Config,
    DeploymentConfig,
    HostConfig,
    LoadProfile,
    UIConfig,
    UnitConfig,
)

__all__ = [
    "DEFAULT_CONCURRENCY",
    "Config",
    "DeploymentConfig",
    "HostConfig",
    "LoadProfile",
    "UIConfig",
    "UnitConfig",
    "find_config_path",
    "load",
    "parse",
]
