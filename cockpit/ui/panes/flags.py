"""The flag editor: the unit's command line as a form, checked as you type, written with `w`.

The form is built from the release's own flag catalog (types, choices, help). Every change is
kept in an edited copy of the unit; the static pre-flight answers at each change, and as a
value is typed, so the mistake shows before anything is written. Where the host's Python imports
SGLang, the release's own resolution of the same flags follows once typing pauses (a dry run of
several seconds, dropped at the next change) and its verdict replaces the static one, marked as
SGLang's own.

The unit view (`R`) shows the unit file as it would be written; where the pre-flight finds a
[Service] setting wrong for SGLang (`KillMode=`), it offers the setting that fixes it there
(`k`), kept in the same edited copy and written by `w` like a flag.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from cockpit.errors import CockpitError
from cockpit.suggest import closest, score
from cockpit.ui.failures import said_failure

# The pane is composed, hidden, on the app's first screen; the pre-flight it draws (and the
# catalog and unit model under it) is imported when a unit is first loaded into it, not
# before the app has drawn the unit's state.
if TYPE_CHECKING:
    from cockpit.sglang.catalog.flags import Catalog, Flag
    from cockpit.sglang.preflight.dry_runs import Verdict
    from cockpit.sglang.preflight.preflight import Finding
    from cockpit.systemd.unit import Unit

FUZZY_CUTOFF = 0.35  # of suggest.score: `memfrac` finds --mem-fraction-static, `zzznotaflag` nothing
ASK_AFTER_S = 0.6  # a pause in typing this long asks SGLang itself (a dry run of several seconds)
TOPICS = (
    (
        "model",
        (
            "model",
            "tokenizer",
            "revision",
            "load-format",
            "dtype",
            "quantization",
            "trust-remote",
            "context",
            "served-model",
            "chat-template",
            "json-model",
        ),
    ),
    (
        "parallelism",
        (
            "tp-size",
            "tensor-parallel",
            "dp-size",
            "pp-size",
            "ep-size",
            "nnodes",
            "node-rank",
            "dist-",
            "attn-dp",
            "moe-dp",
            "enable-dp",
        ),
    ),
    ("speculative decoding", ("speculative",)),
    (
        "memory",
        (
            "mem-fraction",
            "max-total-tokens",
            "kv-cache",
            "page-size",
            "chunked-prefill",
            "max-prefill",
            "cuda-graph",
            "cpu-offload",
            "hicache",
        ),
    ),
    ("scheduling", ("max-running", "schedule", "radix", "priority", "stream-interval", "max-queued")),
    ("server", ("host", "port", "api-key", "log", "metrics", "tool-call", "reasoning", "ssl", "timeout", "device")),
)


def topic_of(name: str) -> str:
    bare = name.lstrip("-")
    for topic, words in TOPICS:
        if any(bare.startswith(w) or w in bare for w in words):
            return topic
    return "other"


_MISSING = object()


def _items(unit: Unit) -> list[tuple[str, object]]:
    from cockpit.sglang.preflight.unit_preflight import SETTINGS

    items: list[tuple[str, object]] = [(i.name or "", i.value) for i in unit.flags()]
    items += [(f"env:{k}", v) for k, v in unit.environment().items()]
    return items + [(f"setting:{k}", unit.setting(k)) for k in SETTINGS]


def _value_text(value: object) -> str:
    if value is None:
        return "(switch)"
    return " ".join(value) if isinstance(value, tuple) else str(value)


class FlagsPane(Vertical):
    """Edits stay in `edited` until `w`; `loaded` is the unit as read from the host."""

    BINDINGS = [
        Binding("enter", "edit", "Edit", id="flags.edit"),
        Binding("a", "add", "Add", id="flags.add"),
        Binding("delete,x", "unset", "Unset", key_display="x", id="flags.unset"),
        Binding("R", "raw", "Raw", id="flags.raw"),
        Binding("k", "setting", "Set fix", id="flags.setting"),
        Binding("w", "write", "Write", id="flags.write"),
        Binding("v", "variant", "Variant", id="flags.variant"),
        Binding("ctrl+z", "revert", "Revert", id="flags.revert"),
        Binding("escape", "close", "Close", id="flags.close"),
    ]
    on_worker_state_changed = said_failure  # a worker that ended in error is said (cockpit.ui.failures)

    class Write(Message):
        def __init__(self, loaded: Unit, edited: Unit, findings: list[Finding]) -> None:
            super().__init__()
            self.loaded, self.edited, self.findings = loaded, edited, findings

    class Variant(Message):
        """The edit, to be added to the unit's experiment plan (not written to the unit)."""

        def __init__(self, loaded: Unit, edited: Unit) -> None:
            super().__init__()
            self.loaded, self.edited = loaded, edited

    class Closed(Message):
        pass

    def __init__(
        self,
        check: Callable[[Unit, Catalog | None], list[Finding]],
        dry_run: Callable[[Unit], Awaitable[Verdict | None]] | None = None,
        complete: Callable[[Unit, str], Awaitable[list[str]]] | None = None,
        **kwargs,
    ) -> None:
        """`check`: the static pre-flight of an edited unit (the session's), run at every change;
        `dry_run`: SGLang's own verdict on it from the host (the session's), asked once typing
        pauses; `complete`: the host's paths that complete a typed value (Tab)."""
        super().__init__(**kwargs)
        self.check = check
        self.dry_run = dry_run
        self.complete = complete
        self.loaded: Unit | None = None
        self._named: list[str] = []  # what the explanation that opened the editor named (load)
        self.edited: Unit | None = None
        self.catalog: Catalog | None = None
        self.findings: list[Finding] = []  # what the pre-flight says of `checked`: static, then SGLang's
        self.checked: Unit | None = None  # the unit as edited, or as it would be with the value being typed
        self._static: list[Finding] = []
        self.verdict: Verdict | None = None
        self._asking: str | None = None  # what the findings line says while SGLang's verdict is awaited
        self._ask_timer: Timer | None = None
        self._editing: str | None = None  # the flag the input edits; "+" while adding
        self._choices: tuple[list[str], bool] = ([], False)
        self._prefill = ""  # the edited flag's choices, and whether any matches
        self._listed_paths = ""  # the value whose completions Tab listed under the field
        self._raw = False

    def compose(self) -> ComposeResult:
        yield Label("", id="flags-head", markup=False)
        with Horizontal(id="flags-body"):
            yield OptionList(id="flag-list", markup=False)
            yield Static("", id="flag-help", markup=False)
        yield Input(id="flag-input")
        yield OptionList(id="flag-suggestions", markup=False)
        yield Static("", id="flag-findings")

    def on_mount(self) -> None:
        self.query_one("#flag-input").display = False
        self.query_one("#flag-suggestions").display = False

    # -- data -----------------------------------------------------------------------------

    def load(self, unit: Unit, catalog: Catalog | None, focus: list[str] | None = None) -> None:
        """`focus`: the flags and `env:NAME` variables an explanation named, marked ▸ and the first
        selected; a named variable the unit does not set gets a row of its own, for Enter to set."""
        self.loaded = self.edited = unit
        self.catalog = catalog
        self._named = list(focus or [])
        self._refresh(focus[0] if focus else None)

    def _flags(self) -> list[tuple[str, object]]:
        """Each flag once (a row's id is its name), with the value SGLang takes: argparse keeps
        the last one given. A unit that gives `--tp-size` twice made the list refuse its second
        row and the editor fail to open."""
        assert self.edited is not None
        values: dict[str, object] = {}
        for item in self.edited.flags():
            values[item.name or ""] = item.value
        return list(values.items())

    def _repeated(self) -> set[str]:
        assert self.edited is not None
        names = [item.name or "" for item in self.edited.flags()]
        return {name for name in names if names.count(name) > 1}

    def _refresh(self, select: str | None = None) -> None:
        if self.edited is None:
            return
        self._check(self.edited)
        self._draw(select)

    def _check(self, unit: Unit) -> None:
        """The static verdict now; SGLang's own once typing pauses (an earlier ask is dropped)."""
        from cockpit.sglang.preflight.dry_runs import replace_static

        same = self.checked is not None and _asked(unit) == _asked(self.checked)
        self.checked = unit
        self._static = self.check(unit, self.catalog)  # the unit's own settings may have changed
        if same:
            self.findings = replace_static(self._static, self.verdict)
            return  # the same command line and environment: SGLang's verdict in hand (or on its way) holds
        self.verdict = None
        self.findings = list(self._static)
        if self._ask_timer is not None:
            self._ask_timer.stop()
        self.workers.cancel_group(self, "dry-run")
        self._asking = None
        if self.dry_run is not None:
            self._ask_timer = self.set_timer(ASK_AFTER_S, lambda: self._ask(unit))

    def _ask(self, unit: Unit) -> None:
        self._asking = "asking SGLang itself on the host (a dry run of its argument resolution) …"
        self._show_findings()
        self.run_worker(self._sglang_verdict(unit), group="dry-run", exclusive=True, exit_on_error=False)

    async def _sglang_verdict(self, unit: Unit) -> None:
        from cockpit.sglang.preflight.dry_runs import replace_static

        assert self.dry_run is not None
        try:
            verdict = await self.dry_run(unit)
        except Exception as e:  # noqa: BLE001 - the editor keeps the static verdict; the app lives on
            verdict = None
            self.log.warning(f"dry run failed: {e!r}")
        if self.checked is None or _asked(unit) != _asked(self.checked):
            return  # an edit came in meanwhile: this answer is about flags no longer shown
        self._asking = None
        self.verdict = verdict
        self.findings = replace_static(self._static, verdict)
        self._draw(None)

    def _draw(self, select: str | None) -> None:
        from cockpit.sglang.preflight.preflight import ERROR

        assert self.edited is not None
        options = self.query_one("#flag-list", OptionList)
        keep = select or (self._selected_name())
        options.clear_options()
        flags = self._flags()
        by_topic: dict[str, list[tuple[str, object]]] = {}
        for name, value in flags:
            by_topic.setdefault(topic_of(name), []).append((name, value))
        bad = {f for finding in self.findings if finding.severity == ERROR for f in finding.flags}
        repeated = self._repeated()
        highlight = None
        for topic in [t for t, _ in TOPICS] + ["other"]:
            if topic not in by_topic:
                continue
            options.add_option(Option(Text(f"── {topic}", style="bold"), disabled=True))
            for name, value in by_topic[topic]:
                label = Text()
                mark = "✗ " if name in bad else "▸ " if name in self._named else "  "
                label.append(f"{mark}{name:<40}", "red bold" if name in bad else "bold" if name in self._named else "")
                label.append(_value_text(value), "italic" if value is None else "")
                if name in repeated:
                    label.append("  (given more than once: the last counts)", "yellow")
                options.add_option(Option(label, id=name))
                if name == keep:
                    highlight = options.option_count - 1
        env = self.edited.environment()
        wanted = [n[4:] for n in self._named if n.startswith("env:") and n[4:] not in env]
        rows = [(key, f"{'▸' if f'env:{key}' in self._named else ' '} {key}={value}") for key, value in env.items()]
        rows += [(key, f"▸ {key} (not set in the unit: Enter sets it)") for key in wanted]
        if rows:
            options.add_option(Option(Text("── environment", style="bold"), disabled=True))
            for key, label_text in rows:
                options.add_option(Option(Text(label_text), id=f"env:{key}"))
                if f"env:{key}" == keep:
                    highlight = options.option_count - 1
        if highlight is None:  # show the first flag the pre-flight blames, else the first flag
            ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
            first_bad = next((i for i, n in enumerate(ids) if n in bad), None)
            highlight = first_bad if first_bad is not None else next((i for i, n in enumerate(ids) if n), None)
        if highlight is not None:
            options.highlighted = highlight
        head = f"{self.edited.defined_in}"
        if self.catalog is not None and self.catalog.version:
            head += f" · SGLang {self.catalog.version} flags"
        pending = self.pending_changes()
        head += f" · {pending} change{'s' * (pending != 1)} not yet written (w writes)" if pending else " · unchanged"
        self.query_one("#flags-head", Label).update(head)
        self._show_findings()
        self._show_help()
        if self._raw:
            self._show_raw()
        self.refresh_bindings()  # `k` comes and goes with the finding it fixes

    def pending_changes(self) -> int:
        """Flags, environment variables and the [Service] settings the pre-flight reads that differ
        between the unit as read and as edited."""
        if self.loaded is None or self.edited is None:
            return 0
        before, after = dict(_items(self.loaded)), dict(_items(self.edited))
        return sum(1 for k in before.keys() | after.keys() if before.get(k, _MISSING) != after.get(k, _MISSING))

    def _show_findings(self) -> None:
        from cockpit.sglang.preflight.preflight import ERROR, WARNING

        text = Text()
        errors = [f for f in self.findings if f.severity == ERROR]
        warnings = [f for f in self.findings if f.severity == WARNING]
        verdict = self.verdict
        if verdict is not None and verdict.decided:
            passed = verdict.outcome == "passed"
            text.append(
                f"{'✓' if passed else '✗'} SGLang {verdict.release}'s own verdict (a dry run on {verdict.host}): "
                f"{'it starts' if passed else 'it will not start'}\n",
                "green bold" if passed else "red bold",
            )
        elif not errors and not warnings:
            text.append("✓ pre-flight: no problem found", "green")
        for f in errors + warnings:
            text.append("✗ " if f.severity == ERROR else "! ", "red bold" if f.severity == ERROR else "yellow")
            text.append(f.message + (f" Fix: {f.fix}" if f.fix else "") + "\n")
        aside = self._asking and f"… {self._asking}"
        if aside is None and verdict is not None and not verdict.decided:
            aside = f"the static checks alone: SGLang's own resolution was {verdict.outcome}"
        if aside:
            text.append(("" if text.plain.endswith("\n") else "\n") + aside, "dim")
        self.query_one("#flag-findings", Static).update(text)

    def _selected_name(self) -> str | None:
        options = self.query_one("#flag-list", OptionList)
        if options.highlighted is None:
            return None
        return options.get_option_at_index(options.highlighted).id

    def _flag(self, name: str | None) -> Flag | None:
        return self.catalog.get(name) if self.catalog is not None and name else None

    def _show_help(self) -> None:
        name = self._selected_name()
        flag = self._flag(name)
        if name is None:
            text = ""
        elif flag is None:
            text = (
                f"{name}: not a flag of this release."
                if not name.startswith("env:")
                else f"{name[4:]}: an environment variable of the unit (Environment=)."
            )
        else:
            kind = "switch" if not flag.takes_value else (flag.type or "value")
            parts = [f"{flag.name} ({kind})"]
            if flag.choices:
                parts.append("choices: " + ", ".join(map(str, flag.choices[:20])))
            if flag.default is not None:
                parts.append(f"default: {flag.default}")
            parts.append(flag.help or "")
            text = "\n".join(p for p in parts if p)
        self.query_one("#flag-help", Static).update(text)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "flag-list" and not self._raw:  # the unit view stays until R again
            self._show_help()

    async def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Enter on the list: the list takes the key before the pane's binding does."""
        if event.option_list.id == "flag-list":
            event.stop()
            self.action_edit()
        elif event.option_list.id == "flag-suggestions":
            event.stop()
            await self.query_one("#flag-input", Input).action_submit()  # async in Textual: it posts Submitted

    def _offered(self) -> Finding | None:
        """The first finding of the edited unit that a [Service] setting fixes (`k` sets it)."""
        return next((f for f in self._static if f.setting is not None), None)

    def _show_raw(self) -> None:
        assert self.edited is not None
        path = self.edited.defined_in
        text = Text(self.edited.render(path))
        offered = self._offered()
        if offered is not None and offered.setting is not None:
            key, value = offered.setting
            text.append(f"\n── k sets {key}={value} in [Service] (the pre-flight's {offered.rule})", "yellow")
        self.query_one("#flag-help", Static).update(text)

    # -- editing --------------------------------------------------------------------------

    def _prompt(self, editing: str, value: str, placeholder: str) -> None:
        self._editing = editing
        self._prefill = value
        field = self.query_one("#flag-input", Input)
        field.placeholder = placeholder
        field.value = value
        field.display = True
        field.focus()

    def action_edit(self) -> None:
        name = self._selected_name()
        if name is None or self.edited is None:
            return
        if name.startswith("env:"):
            key = name[4:]
            self._prompt(name, self.edited.environment().get(key, ""), f"{key}=")
            return
        flag = self._flag(name)
        value = dict(self._flags()).get(name)
        if (flag is not None and not flag.takes_value) or (flag is None and value is None):
            self._toggle_off(name)  # a switch that is on: Enter turns it off (`a` turns it on again)
            return
        kind = f" ({flag.type})" if flag is not None and flag.type else ""
        self._prompt(name, _value_text(value) if value is not None else "", f"{name}{kind}: new value")
        self._offer_choices(name, "")

    def _toggle_off(self, name: str) -> None:
        assert self.edited is not None
        following = self._next_name(name)
        self.edited = self.edited.unset_flag(name)
        self.notify(f"{name} is off now (a adds it again, ctrl+z reverts)", timeout=4)
        self._refresh(following)

    def _offer_choices(self, name: str, typed: str, current: str | None = None) -> None:
        """A flag with choices lists them under the input, filtered by what is typed; the value
        the input opened with shows them all, that one highlighted."""
        flag = self._flag(name)
        box = self.query_one("#flag-suggestions", OptionList)
        if flag is None or not flag.choices:
            self._choices = ([], False)
            box.display = False
            return
        choices = [str(c) for c in flag.choices]
        matching = [c for c in choices if typed.lower() in c.lower()]
        self._choices = (choices, bool(matching))
        shown = matching or choices
        box.clear_options()
        box.add_options(Option(c, id=f"choice:{c}") for c in shown)
        box.display = True
        box.highlighted = next((i for i, c in enumerate(shown) if c in (typed, current)), 0)

    def action_add(self) -> None:
        self._prompt("+", "", "add a flag: type part of its name (fuzzy), Enter to pick, then its value")
        self._suggest("")

    def _suggest(self, text: str) -> None:
        box = self.query_one("#flag-suggestions", OptionList)
        if self.catalog is None:
            box.display = False
            return
        names = [f.name for f in self.catalog.flags if not f.deprecated]
        # Only names somewhat like it (or holding it): junk offers nothing rather than the least
        # unlike flag (`zzznotaflag` offered --cpu-offload-gb, which Enter would have taken).
        ranked = closest(text, names, n=12, cutoff=FUZZY_CUTOFF) if text else sorted(names)[:12]
        contains = [n for n in names if text and text.strip("-") in n]
        picks = list(dict.fromkeys(contains[:6] + ranked))[:12]
        box.clear_options()
        for name in sorted(picks, key=lambda n: -score(text, n)) if text else picks:
            box.add_option(Option(name, id=name))
        box.display = bool(picks)
        if picks:
            box.highlighted = 0

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "flag-input" or self._editing is None:
            return
        if self._editing == "+":
            self._suggest(event.value.strip())
        elif not self._editing.startswith("env:"):
            typed = event.value.strip()
            if self._listed_paths and typed == self._listed_paths:
                pass  # the value Tab filled in: its list of paths stays under it
            elif typed == self._prefill:
                self._offer_choices(self._editing, "", current=typed)
            else:
                self._offer_choices(self._editing, typed)
            self._check_typed(self._editing, event.value)

    def _with_value(self, name: str, text: str) -> Unit:
        assert self.edited is not None
        flag = self._flag(name)
        several = flag is not None and flag.nargs in ("+", "*")
        return self.edited.set_flag(name, tuple(text.split()) if several else text)

    def _check_typed(self, name: str, text: str) -> None:
        """The verdict on the value as typed so far, before Enter."""
        try:
            candidate = self._with_value(name, text)
        except CockpitError:
            return  # a value the unit cannot hold: Enter says why
        self._check(candidate)
        self._show_findings()

    def on_key(self, event) -> None:
        field = self.query_one("#flag-input", Input)
        box = self.query_one("#flag-suggestions", OptionList)
        if field.has_focus and self._editing is not None and event.key in ("tab", "shift+tab"):
            # Tab completes; neither moves the focus out of the editor, where Shift+Tab back
            # selected the whole value and the next key typed over it
            event.stop()
            event.prevent_default()
            if event.key == "tab":
                self._tab(field, box)
        elif field.has_focus and self._editing is not None and box.display and event.key in ("down", "up"):
            if event.key == "down":
                box.action_cursor_down()
            else:
                box.action_cursor_up()
            event.stop()
        elif field.has_focus and event.key == "escape":
            self._end_prompt()
            self._refresh()  # the verdict goes back to the unit as edited, without the typed value
            event.stop()

    def _tab(self, field: Input, box: OptionList) -> None:
        """The highlighted suggestion (a choice, a flag's name, a path) into the field; else the
        host's names that complete a path as typed (Tab again lists inside a directory)."""
        picked = box.get_option_at_index(box.highlighted).id if box.display and box.highlighted is not None else None
        if picked:
            value = picked.partition(":")[2] if picked.startswith(("choice:", "path:")) else picked
            field.value, field.cursor_position = value, len(value)
            return
        from cockpit.sglang.preflight.path_completion import completes

        if self.complete is not None and self.edited is not None and completes(field.value):
            self.run_worker(self._completed(field.value), group="complete", exclusive=True, exit_on_error=False)

    async def _completed(self, typed: str) -> None:
        from cockpit.sglang.preflight.path_completion import shared_start

        assert self.complete is not None and self.edited is not None
        found = await self.complete(self.edited, typed)
        field = self.query_one("#flag-input", Input)
        box = self.query_one("#flag-suggestions", OptionList)
        if self._editing is None or field.value != typed:
            return  # typed on or closed meanwhile: the answer is about a value no longer there
        value = found[0] if len(found) == 1 else max(shared_start(found), typed, key=len)
        field.value, field.cursor_position = value, len(value)
        self._listed_paths = value if len(found) > 1 else ""
        box.clear_options()
        if len(found) > 1:
            box.add_options(Option(name, id=f"path:{name}") for name in found)
            box.display, box.highlighted = True, 0
        else:
            box.display = False
        if not found:
            self.notify(f"nothing on the host starts with {typed}", timeout=4)

    def _end_prompt(self) -> None:
        self.query_one("#flag-input").display = False
        self.query_one("#flag-suggestions").display = False
        self._editing = None
        self.query_one("#flag-list").focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "flag-input" or self.edited is None:
            return
        event.stop()
        editing, text = self._editing, event.value
        box = self.query_one("#flag-suggestions", OptionList)
        try:
            if editing == "+":
                name = (
                    box.get_option_at_index(box.highlighted).id
                    if box.display and box.highlighted is not None
                    else text.strip()
                ) or ""
                if not name:
                    return self._end_prompt()
                name = name if name.startswith("-") else "--" + name
                flag = self._flag(name)
                if flag is not None and not flag.takes_value:
                    self.edited = self.edited.set_flag(name, None)
                    self._end_prompt()
                    return self._refresh(name)
                box.display = False
                self._prompt(name, "", f"{name}: value")
                return self._offer_choices(name, "")
            if editing is not None and editing.startswith("env:"):
                value = text.split("=", 1)[1] if text.startswith(editing[4:] + "=") else text
                self.edited = self.edited.set_env(editing[4:], value)
            elif editing is not None:
                picked = (
                    box.get_option_at_index(box.highlighted).id if box.display and box.highlighted is not None else None
                )
                choices, matching = self._choices
                if picked and picked.startswith("choice:") and text.strip() not in choices and matching:
                    text = picked[len("choice:") :]  # the highlighted choice, unless a value was typed whole
                self.edited = self._with_value(editing, text)
        except CockpitError as e:
            self.notify(str(e), severity="error", timeout=8)
        self._end_prompt()
        self._refresh(editing)

    def _next_name(self, name: str) -> str | None:
        """The row after `name` (or before it, at the end): where the cursor goes when it is removed."""
        options = self.query_one("#flag-list", OptionList)
        ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
        ids = [i for i in ids if i]
        if name not in ids:
            return None
        k = ids.index(name)
        rest = ids[k + 1 :] + list(reversed(ids[:k]))
        return rest[0] if rest else None

    def action_unset(self) -> None:
        name = self._selected_name()
        if name is None or self.edited is None:
            return
        following = self._next_name(name)
        try:
            self.edited = self.edited.unset_env(name[4:]) if name.startswith("env:") else self.edited.unset_flag(name)
        except CockpitError as e:
            self.notify(str(e), severity="error", timeout=8)
            return
        self._refresh(following)

    def action_raw(self) -> None:
        self._raw = not self._raw
        if self._raw:
            self._show_raw()
        else:
            self._show_help()
        self.refresh_bindings()

    def action_setting(self) -> None:
        offered = self._offered()
        if self.edited is None or offered is None or offered.setting is None:
            return
        key, value = offered.setting
        try:
            self.edited = self.edited.set_setting(key, value)
        except CockpitError as e:
            self.notify(str(e), severity="error", timeout=8)
            return
        self.notify(f"{key}={value} set in [Service] (w writes it, ctrl+z reverts)", timeout=4)
        self._refresh()

    def action_revert(self) -> None:
        if self.loaded is not None:
            self.edited = self.loaded
            self._refresh()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "setting":  # offered in the unit view, where the pre-flight found one to set
            return self._raw and self._offered() is not None
        # read-only: the key is hidden, and the app refuses a write anyway
        return not (action == "write" and getattr(self.app, "changes_refused", lambda: False)())

    def action_write(self) -> None:
        if self.loaded is None or self.edited is None:
            return
        if not self.edited.changed():
            self.notify("nothing changed", timeout=3)
            return
        self.post_message(self.Write(self.loaded, self.edited, self.findings))

    def action_variant(self) -> None:
        if self.loaded is None or self.edited is None:
            return
        if not self.edited.changed():
            self.notify("nothing changed: edit a flag first, then v adds the edit to the experiment", timeout=4)
            return
        self.post_message(self.Variant(self.loaded, self.edited))

    def action_close(self) -> None:
        self.post_message(self.Closed())


def _asked(unit: Unit) -> tuple[list[str], dict[str, str]]:
    """What SGLang's verdict depends on: the command line and the unit's Environment= variables."""
    return unit.exec(), unit.environment()
