"""Launch: a form for a job over the tasks of the current filter, option for option the command
line's. It builds the same typed parameters the CLI builds (engine/jobs/params.py), checks them
the same way before anything is stored (models are picked from the registry the job will use),
and shows the command that stores the same job from a shell."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.suggester import SuggestFromList
from textual.widget import Widget
from textual.widgets import (
    Button,
    Checkbox,
    Footer,
    Header,
    Input,
    Label,
    Select,
    SelectionList,
    Static,
)

from depthtui.widgets.sanitize import safe_text
from engine.jobs.params import (
    PARAMS,
    PLANTED,
    EpisodesParams,
    FreeParams,
    JobParams,
    MeasureParams,
    ValidateParams,
)
from engine.protocol.ladder import SEARCHES
from store import jobs, vocab

FAULT_CHOICES = (vocab.NO_FAULT, *vocab.FAULT_FAMILIES)
KINDS = tuple(k for k in PARAMS if k != "replay")  # replay runs stored episodes, from the CLI
# which rows each kind shows: the options its verb takes
ROWS = {
    "row-models": (FreeParams, MeasureParams, EpisodesParams),
    "row-measurement": (MeasureParams,),
    "row-caps": (MeasureParams,),
    "row-fault": (MeasureParams,),
    "row-search": (MeasureParams,),
    "row-faults": (EpisodesParams,),
    "row-attempts": (FreeParams, EpisodesParams),
    "row-prompt": (FreeParams, MeasureParams, EpisodesParams),
    "row-planted": (ValidateParams, EpisodesParams),
    "row-budget": (EpisodesParams,),
    "row-max-tool-calls": (EpisodesParams,),
    "row-max-completion-tokens": (EpisodesParams,),
    "row-max-total-tokens": (EpisodesParams,),
}
ATTEMPTS_DEFAULT = {"free": "2", "episodes": "1"}  # the verbs' own defaults


def _whole(name: str, text: str, errors: list[str], default: int | None) -> int | None:
    text = text.strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        errors.append(f"{name}: expected a whole number of at least 1, got '{text}'")
        return default
    return int(text)


def _money(name: str, text: str, errors: list[str]) -> float | None:
    text = text.strip().lstrip("$")
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        errors.append(f"{name}: expected an amount in US dollars, got '{text}'")
        return None
    if value < 0:
        errors.append(f"{name}: expected an amount of at least 0, got '{text}'")
        return None
    return value


def _path(text: str) -> str | None:
    """As the CLI stores a path option: absolute."""
    text = text.strip()
    return str(Path(text).expanduser().resolve()) if text else None


def _words(text: str) -> tuple[str, ...]:
    return tuple(w for w in text.replace(",", " ").split() if w)


def registry_models(models_file: str | None) -> tuple[list[str], str]:
    """The registry's model names and where they come from (or why none could be read)."""
    from engine.agents.registry import RegistryError, load_registry

    try:
        registry = load_registry(models_file)
    except RegistryError as exc:
        return [], str(exc)
    where = f"from {registry.path}" if registry.path else "no models file: built-in agents only"
    return registry.names(), where


def measurement_note(models: tuple[str, ...]) -> Text:
    """Which picked model is the measurement model (ladder, audit): the first one picked makes
    the uncapped runs that give N; the others only try caps below its estimate."""
    if not models:
        return Text("the first model you pick: it makes the uncapped runs (N)", style="dim")
    note = Text.assemble(
        ("measurement model ", "dim"), (models[0], "bold"), (": the uncapped runs (N)", "dim")
    )
    if len(models) > 1:
        note.append(f"; then {', '.join(models[1:])}: caps below its estimate", style="dim")
    return note


def _row(label: str, *widgets: Widget, row_id: str | None = None) -> Horizontal:
    return Horizontal(Label(label, classes="form-label"), *widgets, classes="form-row", id=row_id)


def _say_state(box: Checkbox) -> None:
    """A checkbox says on or off in words: its colour alone was the only sign."""
    flag = str(box.label).split(" (")[0]
    box.label = f"{flag} ({'on' if box.value else 'off'})"


class LaunchScreen(Screen[None]):
    BINDINGS = [
        Binding("ctrl+s", "submit", "Submit job"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, task_ids: tuple[str, ...]) -> None:
        super().__init__()
        self.task_ids = tuple(task_ids)
        self._kind = "check"

    def compose(self) -> ComposeResult:
        from engine.agents.prompts import prompt_names

        yield Header()
        with VerticalScroll(id="launch-form"):
            shown = ", ".join(self.task_ids[:6]) + (
                f" … (+{len(self.task_ids) - 6})" if len(self.task_ids) > 6 else ""
            )
            yield Static(
                Text.assemble((f"{len(self.task_ids)} task(s): ", "bold"), safe_text(shown)),
                id="launch-tasks",
            )
            kinds = [(k, k) for k in KINDS]
            yield _row("mode", Select(kinds, value="check", allow_blank=False, id="mode"))
            yield _row(
                "--models (file)",
                Input(placeholder="the default registry ($DEPTHTUI_MODELS)", id="models-file"),
            )
            yield _row(
                "--model",
                SelectionList[str](id="models"),
                Static(id="models-note", classes="form-note"),
                row_id="row-models",
            )
            # ladder/audit: which picked model measures N, in the form itself (it was only
            # readable from the order of --model in the command below).
            yield _row(
                "measured by",
                Static(id="measurement", classes="form-note"),
                row_id="row-measurement",
            )
            caps = [(str(c), c, True) for c in vocab.CAPS]
            yield _row("--cap", SelectionList[int](*caps, id="caps"), row_id="row-caps")
            faults = [(f, f) for f in FAULT_CHOICES]
            yield _row(
                "--fault",
                Select(faults, value=vocab.NO_FAULT, allow_blank=False, id="fault"),
                row_id="row-fault",
            )
            searches = [(name, name) for name in SEARCHES]
            yield _row(
                "--search",
                Select(searches, value="protocol", allow_blank=False, id="search"),
                row_id="row-search",
            )
            arms = [(f, f, f == vocab.NO_FAULT) for f in FAULT_CHOICES]
            yield _row("--faults", SelectionList[str](*arms, id="faults"), row_id="row-faults")
            yield _row("--attempts", Input(value="2", id="attempts"), row_id="row-attempts")
            yield _row(
                "--prompt",
                Input(
                    value="general",
                    placeholder="a prompt name or .txt path (episodes: arms, comma separated)",
                    suggester=SuggestFromList(prompt_names()),
                    id="prompt",
                ),
                row_id="row-prompt",
            )
            planted = [(p, p) for p in PLANTED]
            yield _row(
                "--planted",
                Select(planted, value="full", allow_blank=False, id="planted"),
                row_id="row-planted",
            )
            yield _row(
                "--budget", Input(placeholder="none stated", id="budget"), row_id="row-budget"
            )
            for flag, default in (
                ("max-tool-calls", "16"),
                ("max-completion-tokens", "6144"),
                ("max-total-tokens", "8192"),
            ):
                yield _row(f"--{flag}", Input(value=default, id=flag), row_id=f"row-{flag}")
            yield _row("--workers", Input(value="1", id="workers"))
            yield _row("--max-cost $", Input(placeholder="no limit", id="max-cost"))
            yield _row("--reserve $", Input(placeholder="none", id="reserve"))
            yield _row("--stop-file", Input(placeholder="none", id="stop-file"))
            yield _row(
                "",
                Checkbox("--retry-errors", id="retry-errors"),
                Checkbox("--accept-risk", id="accept-risk"),
            )
            yield Static("equivalent command", classes="section-title")
            yield Static(id="cli-preview")
            yield Static(id="launch-problems")
        # outside the scroll: Submit stays in view however long the form (100×30 cut it off)
        with Horizontal(id="launch-buttons"):
            yield Button("Submit job", variant="primary", id="submit", compact=True)
            yield Button("Cancel", id="cancel", compact=True)
        yield Footer()

    def on_mount(self) -> None:
        for widget in self.query("Input, Select, SelectionList, Checkbox"):
            widget.compact = True  # one line each: the whole form fits a 100×30 terminal
        for box in self.query(Checkbox):
            _say_state(box)
        self.query_one("#mode", Select).focus()
        self._load_models()
        self._update()

    # ------------------------------------------------------------------ the form's values

    def _value(self, widget_id: str) -> str:
        return self.query_one(f"#{widget_id}", Input).value

    def _load_models(self) -> None:
        names, note = registry_models(_path(self._value("models-file")))
        models = self.query_one("#models", SelectionList)
        chosen = set(models.selected)
        models.clear_options()
        models.add_options([(n, n, n in chosen) for n in names])
        self.query_one("#models-note", Static).update(Text(note, style="dim"))

    def params(self) -> tuple[JobParams, list[str]]:
        """The job's parameters, and every problem (the form's own, then the type's check)."""
        errors: list[str] = []
        kind = str(self.query_one("#mode", Select).value)
        common = {
            "tasks": self.task_ids,
            "workers": _whole("--workers", self._value("workers"), errors, 1),
            "max_cost": _money("--max-cost", self._value("max-cost"), errors),
            "reserve": _money("--reserve", self._value("reserve"), errors) or None,
            "stop_file": _path(self._value("stop-file")),
            "models_file": _path(self._value("models-file")),
            "retry_errors": self.query_one("#retry-errors", Checkbox).value,
            "accept_risk": self.query_one("#accept-risk", Checkbox).value,
        }
        cls = PARAMS[kind]
        models = tuple(self.query_one("#models", SelectionList).selected)
        prompts = _words(self._value("prompt"))
        extra: dict = {}
        if issubclass(cls, ValidateParams):
            extra["planted"] = str(self.query_one("#planted", Select).value)
        elif issubclass(cls, FreeParams):
            extra = {
                "models": models,
                "attempts": _whole("--attempts", self._value("attempts"), errors, 2),
                "prompt": prompts[0] if prompts else "",
            }
        elif issubclass(cls, MeasureParams):
            caps = tuple(sorted(self.query_one("#caps", SelectionList).selected))
            fault = str(self.query_one("#fault", Select).value)
            extra = {
                "models": models,
                "caps": None if caps == vocab.CAPS else caps,  # the CLI's default: every cap
                "prompt": prompts[0] if prompts else "",
                "fault": None if fault == vocab.NO_FAULT else fault,
                "search": str(self.query_one("#search", Select).value),
            }
        elif issubclass(cls, EpisodesParams):
            selected = self.query_one("#faults", SelectionList).selected
            extra = {
                "models": models,
                "faults": tuple(f for f in FAULT_CHOICES if f in selected),
                "attempts": _whole("--attempts", self._value("attempts"), errors, 1),
                "budget": _whole("--budget", self._value("budget"), errors, None),
                "prompts": prompts,
                "planted": str(self.query_one("#planted", Select).value),
            }
            for flag, default in (
                ("max-tool-calls", 16),
                ("max-completion-tokens", 6144),
                ("max-total-tokens", 8192),
            ):
                value = _whole(f"--{flag}", self._value(flag), errors, default)
                extra[flag.replace("-", "_")] = value
        if kind in ("free", "ladder", "audit") and len(prompts) > 1:
            errors.append(f"--prompt: {kind} takes one prompt (episodes compares several arms)")
        params = cls(**common, **extra)
        return params, errors + params.problems()

    def cli(self, params: JobParams) -> str:
        """The command that stores this job from a shell, in this store, for the engine."""
        return params.cli(self.app.db_path.expanduser().resolve()) + " --detach"

    # ------------------------------------------------------------------ showing

    def _update(self) -> None:
        kind = str(self.query_one("#mode", Select).value)
        cls = PARAMS[kind]
        for row_id, kinds in ROWS.items():
            self.query_one(f"#{row_id}").display = issubclass(cls, kinds)
        if kind != self._kind:
            self._kind = kind
            attempts = self.query_one("#attempts", Input)
            default = ATTEMPTS_DEFAULT.get(kind)
            if default is not None and attempts.value != default:
                attempts.value = default
                return  # the Input.Changed that follows updates the rest
        params, problems = self.params()
        self.query_one("#cli-preview", Static).update(safe_text(self.cli(params), style="bold"))
        models = tuple(self.query_one("#models", SelectionList).selected)
        self.query_one("#measurement", Static).update(measurement_note(models))
        self.query_one("#launch-problems", Static).update(
            Text("\n".join(problems), style="bold red") if problems else Text("")
        )
        self.query_one("#submit", Button).disabled = bool(problems)

    @on(Input.Changed)
    @on(Select.Changed)
    @on(SelectionList.SelectedChanged)
    @on(Checkbox.Changed)
    def _changed(self, event) -> None:
        event.stop()
        if isinstance(event, Input.Changed) and event.input.id == "models-file":
            self._load_models()
        if isinstance(event, Checkbox.Changed):
            _say_state(event.checkbox)
        self._update()

    @on(Button.Pressed, "#submit")
    def _submit_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_submit()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_cancel()

    def action_submit(self) -> None:
        params, problems = self.params()
        if problems:
            self.notify("\n".join(problems), severity="error")
            return
        from engine.protocol.common import repeat_warnings

        job_id = jobs.submit_job(self.app.writer, params.KIND, params.to_json(), self.cli(params))
        self.app.notify(f"job #{job_id} queued: {params.KIND} on {len(params.tasks)} task(s)")
        for warning in repeat_warnings(params.KIND, params.to_json()):  # as the CLI warns
            self.app.notify(warning, severity="warning")
        self.app.hand_to_engine(job_id, params.workers)
        self.app.pop_screen()
        self.app.show_job(job_id)

    def action_cancel(self) -> None:
        self.app.pop_screen()
