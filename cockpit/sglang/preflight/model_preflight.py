"""Before a start: the model against the host and the release. Will it fit on the GPUs its ranks
use (model_fit), does the draft fit its target (draft_fit), does the release have a model class
for it (architectures), and the release's checks its config.json decides (model_checks: the
context length, and chunked prefill by page where the model keeps chunked prefill on).

The model directories are read on the host once each (config.json, and the target's weight
bytes); the GPU table is the one the host check already read, handed in, so nvidia-smi runs
once per pre-flight. A model named by a Hugging Face id rather than a directory is not on the
host to read: said once, nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError
from cockpit.sglang.catalog.flags import Catalog
from cockpit.sglang.deployments.deployment import off_gpus
from cockpit.sglang.preflight.architectures import ArchitectureCache, architecture_findings, in_transformers
from cockpit.sglang.preflight.draft_fit import DRAFT, algorithm_of, draft_findings
from cockpit.sglang.preflight.host_preflight import check_host
from cockpit.sglang.preflight.model_checks import CHUNK_PAGE, chunk_page_findings, context_findings
from cockpit.sglang.preflight.model_files import ModelFiles, read_model_files
from cockpit.sglang.preflight.model_fit import fit_findings
from cockpit.sglang.preflight.preflight import INFO, WARNING, Finding, check_paths, given_flags, on_host
from cockpit.sglang.preflight.rule_families import Flags
from cockpit.systemd import gpu_use
from cockpit.systemd.gpu_use import GpuUse
from cockpit.systemd.process_facts import Viewpoint

MODEL = "--model-path"
LOCAL = ("/", "./", "../")


def on_disk(path: str | None) -> bool:
    return bool(path) and str(path).startswith(LOCAL)


async def check_before_start(
    host: Host,
    argv: Sequence[str],
    catalog: Catalog,
    view: Viewpoint,
    env: Mapping[str, str] | None = None,
    *,
    root: str | None,
    architectures: ArchitectureCache,
    use: GpuUse | None = None,
    cwd: str = "/",
) -> list[Finding]:
    """Everything the host decides about a start, on one read of its GPU table (`use`, where the
    caller read it already): what other processes hold that the unit will need (host_preflight),
    the model directories the flags name (check_paths, from the unit's WorkingDirectory `cwd`)
    and the model (check_model). A server given another `--device` than CUDA uses none of the
    GPUs: the lab's real SGLang on `--device cpu` was told that a process on GPU 0 held its
    memory, and offered it to end."""
    off = off_gpus(given_flags(argv, catalog).get("--device"))
    if off is not None:
        use = GpuUse(missing=off)
    use = use or await gpu_use.read_or_say(host)
    held = await check_host(host, argv, catalog, view, env, use=use)
    paths = await check_paths(host, argv, catalog, cwd)
    model = await check_model(host, argv, catalog, use, view, env, root=root, architectures=architectures, cwd=cwd)
    return held + paths + model


async def check_model(
    host: Host,
    argv: Sequence[str],
    catalog: Catalog,
    use: GpuUse,
    view: Viewpoint,
    env: Mapping[str, str] | None = None,
    *,
    root: str | None,
    architectures: ArchitectureCache,
    cwd: str = "/",
) -> list[Finding]:
    """The model findings for a server argv; `root` is where the service's Python keeps SGLang
    (None: unknown, and the architecture is not checked); `cwd`, the unit's WorkingDirectory."""
    flags = given_flags(argv, catalog)
    version = catalog.version or ""
    path = flags.get(MODEL)
    if not on_disk(path):
        return [Finding(INFO, "model-fit", [], f"{MODEL} {path} is not a directory on {host.name}: no model checks.")]
    assert path is not None
    target = await read_model_files(host, on_host(path, cwd))
    if target.config is None:
        return []  # check_paths says the directory or its config.json is missing
    found = context_findings(target, flags, env or {}, version)
    if root is not None and CHUNK_PAGE.broken(Flags(flags)) is not None:
        unsupported = await architectures.without_chunked_prefill(host, root, version)
        found += chunk_page_findings(target, flags, version, unsupported)
    found += fit_findings(target, flags, env or {}, use, view, host.name, version)
    draft_path = flags.get(DRAFT)
    draft: ModelFiles | None = None
    if algorithm_of(flags) is not None:
        if on_disk(draft_path) and draft_path != path:
            assert draft_path is not None
            draft = await read_model_files(host, on_host(draft_path, cwd), sizes=False)
        if draft_path is None or draft is not None or draft_path == path:
            found += draft_findings(flags, target, draft, version)
    if root is not None:
        found += await _architectures(host, root, version, architectures, [(MODEL, target), (DRAFT, draft)])
    return found


async def _architectures(
    host: Host,
    root: str,
    version: str,
    cache: ArchitectureCache,
    models: list[tuple[str, ModelFiles | None]],
) -> list[Finding]:
    try:
        supported = await cache.get(host, root, version)
    except (CockpitError, HostError) as e:
        return [Finding(WARNING, "model-architecture", [], f"the release's model classes could not be read: {e}")]
    found = []
    for flag, model in models:
        if model is None or model.architecture is None or model.architecture in supported:
            continue
        try:
            known = await in_transformers(host, root, model.architecture)
        except HostError:
            known = None
        found += architecture_findings(model, flag, supported, version, known)
    return found
