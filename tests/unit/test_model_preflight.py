"""The model checks together, as `cockpit preflight` and the write modal run them: a server argv
read with the real 0.5.23 flag catalog, the recorded model directories read over a host, the
registry from the real 0.5.23 source, and one GPU table for the host check and the fit."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.remote.local import LocalHost
from cockpit.sglang.catalog.flags import load_catalog
from cockpit.sglang.preflight.architectures import ArchitectureCache
from cockpit.sglang.preflight.host_preflight import check_host
from cockpit.sglang.preflight.model_preflight import check_before_start, check_model
from cockpit.systemd.process_facts import Viewpoint
from tests.unit.test_model_fit import h200s

MODELS = Path(__file__).parents[1] / "data" / "models"
VIEW = Viewpoint("sglang.service", "aaaa")


@pytest.fixture(scope="module")
def release(sglang_root):
    root = sglang_root("0.5.23")
    return load_catalog(root), str(root)


async def run(release, *argv: str, use=None) -> list:
    catalog, root = release
    found = await check_model(
        LocalHost("gpu-1"), list(argv), catalog, use or h200s(8), VIEW, {}, root=root, architectures=ArchitectureCache()
    )
    return [(f.rule, f.severity) for f in found], found


async def test_llama_70b_with_its_eagle3_draft_of_the_8b(release) -> None:
    rules, found = await run(
        release,
        *("--model-path", str(MODELS / "Llama-3.1-70B-Instruct"), "--tp-size", "8"),
        *("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path"),
        str(MODELS / "EAGLE3-LLaMA3.1-Instruct-8B"),
    )
    assert rules == [("model-fit", "info"), ("draft-fit", "error")]
    assert "16.4 GiB per GPU" in found[0].message and "4096 wide" in found[1].message


async def test_an_unknown_architecture_is_checked_on_the_host(release, tmp_path: Path) -> None:
    config = (MODELS / "Llama-3.1-8B-Instruct" / "config.json").read_text()
    (tmp_path / "config.json").write_text(config.replace('"LlamaForCausalLM"', '"FooBarForCausalLM"'))
    rules, found = await run(release, "--model-path", str(tmp_path))
    # no index, no shards: the size is unknown; the 0.5.23 source has no transformers beside it
    assert rules == [("model-fit", "info"), ("model-architecture", "warning")]
    assert "FooBarForCausalLM" in found[1].message


async def test_a_class_neither_has_is_an_error(release, tmp_path: Path) -> None:
    """A site-packages holding the real 0.5.23 `sglang` and a transformers that has Llama only."""
    catalog, root = release
    site = tmp_path / "site-packages"
    (site / "transformers" / "models" / "llama").mkdir(parents=True)
    (site / "transformers" / "models" / "llama" / "modeling_llama.py").write_text("class LlamaForCausalLM(Base):\n")
    (site / "sglang").symlink_to(Path(root) / "sglang")
    model = tmp_path / "model"
    model.mkdir()
    config = (MODELS / "Llama-3.1-8B-Instruct" / "config.json").read_text()
    (model / "config.json").write_text(config.replace('"LlamaForCausalLM"', '"FooBarForCausalLM"'))

    async def checked() -> list:
        return await check_model(
            LocalHost("gpu-1"),
            ["--model-path", str(model)],
            catalog,
            h200s(1),
            VIEW,
            root=str(site),
            architectures=ArchitectureCache(),
        )

    found = await checked()
    assert [(f.rule, f.severity, f.would_raise) for f in found][1:] == [("model-architecture", "error", "ValueError")]
    (model / "config.json").write_text(config)  # the real architecture: nothing to say of it
    assert [f.rule for f in await checked()] == ["model-fit"]


async def test_a_hugging_face_id_is_not_read(release) -> None:
    rules, found = await run(release, "--model-path", "meta-llama/Llama-3.1-8B-Instruct")
    assert rules == [("model-fit", "info")] and "not a directory on gpu-1" in found[0].message


async def test_a_missing_directory_is_left_to_check_paths(release, tmp_path: Path) -> None:
    assert (await run(release, "--model-path", str(tmp_path / "gone")))[0] == []


async def test_a_config_nested_too_deep_to_read_is_no_config(release, tmp_path: Path) -> None:
    """A host's config.json nested 100,000 deep raised RecursionError out of the pre-flight."""
    (tmp_path / "config.json").write_text('{"architectures": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert (await run(release, "--model-path", str(tmp_path)))[0] == []


async def test_the_host_check_takes_the_table_handed_in(release) -> None:
    class NoRun(LocalHost):
        async def run(self, argv, **kw):
            assert "nvidia-smi" not in " ".join(argv), "the GPU table was read a second time"
            return await super().run(argv, **kw)

    catalog, _ = release
    use = h200s(1, {0: 130 * 1024})
    argv = ["--model-path", str(MODELS / "Llama-3.1-8B-Instruct"), "--mem-fraction-static", "0.9"]
    found = await check_host(NoRun("gpu-1"), argv, catalog, VIEW, {}, use=use)
    assert [f.rule for f in found if f.rule == "gpu-held-by-other"] == ["gpu-held-by-other"]


async def test_cockpit_preflight_reports_the_model_findings(release, monkeypatch: pytest.MonkeyPatch) -> None:
    """`cockpit preflight --host H --unit U --json`'s `_checked` over a stand-in session: the unit's
    ExecStart serves the 70B at tp 1 with --mem-fraction-static 0.9 on one H200."""
    import contextlib
    from types import SimpleNamespace

    from cockpit.cli import build_parser
    from cockpit.cli import preflight as cli
    from cockpit.targets import Target

    catalog, root = release
    argv = [
        "/opt/venv/bin/python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(MODELS / "Llama-3.1-70B-Instruct"),
    ]
    argv += ["--mem-fraction-static", "0.9"]
    target = Target("gpu-1", "sglang.service")
    found = SimpleNamespace(
        target=target,
        unit=SimpleNamespace(name="sglang.service", environment=lambda: {}, setting=lambda key: None),
        command=argv,
        interpreter=argv[0],
        package_root=root,
        catalog=catalog,
        problems=[],
        status=SimpleNamespace(running_invocation="aaaa"),
    )
    reads: list[str] = []

    async def read_or_say(host):
        reads.append(host.name)
        return h200s(1)

    async def read_deployment(*args, **kwargs):
        return found

    @contextlib.asynccontextmanager
    async def open_target(args, unit=True):
        yield SimpleNamespace(host=LocalHost("gpu-1"), target=target, catalogs=None)

    monkeypatch.setattr("cockpit.cli.target.open_target", open_target)
    monkeypatch.setattr("cockpit.sglang.deployments.deployment.read_deployment", read_deployment)
    monkeypatch.setattr("cockpit.systemd.gpu_use.read_or_say", read_or_say)
    args = build_parser().parse_args(["preflight", "--host", "gpu-1", "--unit", "sglang.service", "--static-only"])
    report = await cli._run(args)
    fit = [f for f in report.findings if f.rule == "model-fit"]
    assert [(f.severity, f.would_raise) for f in fit] == [("error", "ValueError")] and not report.would_start
    assert "--mem-fraction-static 0.9" in fit[0].message and reads == ["gpu-1"]  # the GPU table read once


async def test_a_server_on_the_cpu_is_told_of_no_gpu_and_its_holders(release) -> None:
    """The real-SGLang lab's units run `--device cpu` beside another unit's GPU processes: the
    pre-flight said one of those held their GPU 0, and the write modal offered to end it."""
    catalog, _ = release
    use = h200s(1, {0: 130 * 1024})
    argv = ["--model-path", str(MODELS / "Llama-3.1-8B-Instruct"), "--mem-fraction-static", "0.9"]

    async def findings(*more: str) -> dict[str, list]:
        found = await check_before_start(
            LocalHost("gpu-1"), [*argv, *more], catalog, VIEW, {}, root=None, architectures=ArchitectureCache(), use=use
        )
        return {rule: [f for f in found if f.rule == rule] for rule in ("gpu-held-by-other", "model-fit")}

    on_gpus, on_cpu = await findings(), await findings("--device", "cpu")
    assert [f.severity for f in on_gpus["gpu-held-by-other"]] == ["error"]
    assert on_cpu["gpu-held-by-other"] == []
    [fit] = on_cpu["model-fit"]
    assert fit.severity == "info" and "runs on --device cpu, not on the GPUs" in fit.message, fit
