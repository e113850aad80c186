"""Messages that bubble up from screens and widgets to the app, which owns navigation."""

from __future__ import annotations

from textual._context import active_app
from textual.message import Message


class Navigate(Message):
    """A message that opens a screen. Made in a key's action, it asks the app to hold the keys
    typed after it until that screen is up (DepthApp.hold_keys): else they would be resolved on
    the screen being left, before the message reaches the app."""

    def __init__(self) -> None:
        super().__init__()
        try:
            app = active_app.get()
        except LookupError:  # made outside a running app (a test's own message)
            return
        hold = getattr(app, "hold_keys", None)
        if hold is not None:
            hold()


class OpenEpisode(Navigate):
    """Show an episode's replay, at `turn` (default: the first), with H/L moving through
    `context` (default: the task's episodes) and n/N through the turns matching `query`."""

    def __init__(
        self,
        episode_id: int,
        turn: int | None = None,
        context: tuple[int, ...] = (),
        query: str = "",
    ) -> None:
        super().__init__()
        self.episode_id = episode_id
        self.turn = turn
        self.context = context
        self.query = query


class OpenTask(Navigate):
    """Show one task's detail and ladder grid."""

    def __init__(self, task_id: str) -> None:
        super().__init__()
        self.task_id = task_id


class OpenDataset(Navigate):
    """Show the tasks screen filtered to one dataset."""

    def __init__(self, dataset: str) -> None:
        super().__init__()
        self.dataset = dataset


class Searched(Message):
    """A search was run: episodes opened from any screen mark the turns matching `query`."""

    def __init__(self, query: str) -> None:
        super().__init__()
        self.query = query


class Launch(Navigate):
    """Open the launch form for these tasks."""

    def __init__(self, task_ids: tuple[str, ...]) -> None:
        super().__init__()
        self.task_ids = task_ids
