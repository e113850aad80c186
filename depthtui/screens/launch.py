"""Launch: a form for an evaluation over the tasks of the current filter. It shows the equivalent
command line as it is filled in and, on submit, queues a job for the engine (store/jobs.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Footer, Header, Input, Label, Select, SelectionList, Static

from depthtui.widgets.sanitize import safe_text
from engine.protocol.registry import get_kind
from store import jobs, views

FAULTS = ("clean", "perm_denied", "moved_input", "blocking_fifo")
USES_MODELS = ("free", "ladder", "audit", "episodes")
USES_CAPS = ("ladder", "audit")
USES_FAULTS = ("ladder", "audit", "episodes")  # ladder/audit: one family, measured under it
USES_ATTEMPTS = ("free", "episodes")


@dataclass(frozen=True)
class LaunchForm:
    """What the form holds. `params()` are the job's parameters in the engine's own names
    (engine/protocol), and `cli()` is the engine's own rendering of them as a command line."""

    tasks: tuple[str, ...]
    mode: str = "check"
    models: tuple[str, ...] = ()
    caps: tuple[int, ...] = views.CAPS
    faults: tuple[str, ...] = ("clean",)
    attempts: int = 1
    workers: int = 2
    max_cost: float | None = None
    reserve: float | None = None
    errors: tuple[str, ...] = field(default=(), compare=False)

    def problems(self) -> list[str]:
        found = list(self.errors)
        if not self.tasks:
            found.append("tasks: none selected (filter the task list first)")
        if self.mode not in jobs.KINDS:
            found.append(f"mode: '{self.mode}' is not one of {', '.join(jobs.KINDS)}")
        if self.mode in USES_MODELS and not self.models:
            found.append(f"models: {self.mode} needs at least one model")
        if self.mode in USES_CAPS and not self.caps:
            found.append("caps: choose at least one cap")
        if self.mode in USES_FAULTS and not self.faults:
            found.append("faults: choose at least one fault family (clean: none)")
        if self.mode in USES_CAPS and len(self.faults) > 1:
            found.append(f"faults: {self.mode} measures under one family at a time")
        return found

    def params(self) -> dict:
        params: dict = {"tasks": list(self.tasks), "workers": self.workers}
        if self.mode in USES_MODELS:
            params["models"] = list(self.models)
        if self.mode in USES_CAPS:
            if tuple(self.caps) != views.CAPS:  # the engine's default is every cap
                params["caps"] = list(self.caps)
            if self.faults and self.faults[0] != "clean":
                params["fault"] = self.faults[0]
        if self.mode == "episodes":
            params["faults"] = list(self.faults)
        if self.mode in USES_ATTEMPTS:
            params["attempts"] = self.attempts
        if self.max_cost is not None:
            params["max_cost"] = self.max_cost
        if self.reserve is not None:
            params["reserve"] = self.reserve
        return params

    def cli(self) -> str:
        """The equivalent command: the engine's rendering, handed to the background engine."""
        return get_kind(self.mode).describe(self.params()) + " --detach"


def _whole(name: str, text: str, errors: list[str], default: int) -> int:
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


class LaunchScreen(Screen[None]):
    BINDINGS = [
        Binding("ctrl+s", "submit", "Submit job"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, task_ids: tuple[str, ...]) -> None:
        super().__init__()
        self.task_ids = tuple(task_ids)

    def compose(self) -> ComposeResult:
        models = views.known_models(self.app.conn)
        yield Header()
        with VerticalScroll(id="launch-form"):
            shown = ", ".join(self.task_ids[:6]) + (
                f" … (+{len(self.task_ids) - 6})" if len(self.task_ids) > 6 else ""
            )
            yield Static(
                Text.assemble((f"{len(self.task_ids)} task(s): ", "bold"), safe_text(shown)),
                id="launch-tasks",
            )
            with Horizontal(classes="form-row"):
                yield Label("mode", classes="form-label")
                yield Select(
                    [(k, k) for k in jobs.KINDS], value="check", allow_blank=False, id="mode"
                )
            with Horizontal(classes="form-row", id="row-models"):
                yield Label("models", classes="form-label")
                yield Input(
                    value=models[0] if models else "",
                    placeholder="model names, comma separated",
                    suggester=SuggestFromList(models, case_sensitive=False),
                    id="models",
                )
            with Horizontal(classes="form-row", id="row-caps"):
                yield Label("caps", classes="form-label")
                yield SelectionList[int](*[(str(c), c, True) for c in views.CAPS], id="caps")
            with Horizontal(classes="form-row", id="row-faults"):
                yield Label("faults", classes="form-label")
                yield SelectionList[str](*[(f, f, f == "clean") for f in FAULTS], id="faults")
            with Horizontal(classes="form-row", id="row-attempts"):
                yield Label("attempts", classes="form-label")
                yield Input(value="1", id="attempts")
            with Horizontal(classes="form-row"):
                yield Label("workers", classes="form-label")
                yield Input(value="2", id="workers")
            with Horizontal(classes="form-row"):
                yield Label("--max-cost $", classes="form-label")
                yield Input(placeholder="no limit", id="max-cost")
            with Horizontal(classes="form-row"):
                yield Label("--reserve $", classes="form-label")
                yield Input(placeholder="none", id="reserve")
            yield Static("equivalent command", classes="section-title")
            yield Static(id="cli-preview")
            yield Static(id="launch-problems")
            with Horizontal(id="launch-buttons"):
                yield Button("Submit job", variant="primary", id="submit")
                yield Button("Cancel", id="cancel")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#mode", Select).focus()
        self._update()

    def form(self) -> LaunchForm:
        errors: list[str] = []
        mode = self.query_one("#mode", Select).value
        models_text = self.query_one("#models", Input).value
        models = tuple(m.strip() for m in models_text.replace(",", " ").split() if m.strip())
        return LaunchForm(
            tasks=self.task_ids,
            mode=str(mode),
            models=models,
            caps=tuple(sorted(self.query_one("#caps", SelectionList).selected)),
            faults=tuple(
                f for f in FAULTS if f in self.query_one("#faults", SelectionList).selected
            ),
            attempts=_whole("attempts", self.query_one("#attempts", Input).value, errors, 1),
            workers=_whole("workers", self.query_one("#workers", Input).value, errors, 2),
            max_cost=_money("--max-cost", self.query_one("#max-cost", Input).value, errors),
            reserve=_money("--reserve", self.query_one("#reserve", Input).value, errors),
            errors=tuple(errors),
        )

    def _update(self) -> None:
        form = self.form()
        self.query_one("#row-models").display = form.mode in USES_MODELS
        self.query_one("#row-caps").display = form.mode in USES_CAPS
        self.query_one("#row-faults").display = form.mode in USES_FAULTS
        self.query_one("#row-attempts").display = form.mode in USES_ATTEMPTS
        self.query_one("#cli-preview", Static).update(safe_text(form.cli(), style="bold"))
        problems = form.problems()
        self.query_one("#launch-problems", Static).update(
            Text("\n".join(problems), style="bold red") if problems else Text("")
        )
        self.query_one("#submit", Button).disabled = bool(problems)

    @on(Input.Changed)
    @on(Select.Changed)
    @on(SelectionList.SelectedChanged)
    def _changed(self, event) -> None:
        event.stop()
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
        form = self.form()
        problems = form.problems()
        if problems:
            self.notify("\n".join(problems), severity="error")
            return
        job_id = jobs.submit_job(self.app.writer, form.mode, form.params(), form.cli())
        self.app.notify(f"job #{job_id} queued: {form.mode} on {len(form.tasks)} task(s)")
        self.app.hand_to_engine(job_id, form.workers)
        self.app.pop_screen()
        self.app.switch_mode("jobs")

    def action_cancel(self) -> None:
        self.app.pop_screen()
