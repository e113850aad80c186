"""The order of keys: a key typed while a screen opens goes to that screen, never to the one
being left (DepthApp mixes this in before Textual's App)."""

from __future__ import annotations

from textual import events
from textual.app import App, ScreenStackError
from textual.screen import Screen
from textual.timer import Timer

HOLD_KEYS_S = 3.0  # the longest keys are held while a screen opens (hold_keys)


class KeyOrder(App[None]):
    """Bound keys run as they arrive; keys typed while a screen opens wait for it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._navigating = 0  # screens being opened by a message (hold_keys)
        self._held_keys: list[events.Key] = []
        self._key_timer: Timer | None = None
        self._key_screens: dict[int, Screen] = {}  # unbound keys handed on -> the screen shown

    # Keys typed while a screen is being opened. A key that opens a screen through a message
    # (OpenEpisode, Launch: widgets/messages.py Navigate) is handled before the message reaches
    # the app, and the keys typed after it would be resolved on the screen being left (`r`
    # twice: two launch forms). So from the message's making until the new screen is mounted,
    # keys are held, then handed on in order to the screen the user now sees.

    def hold_keys(self) -> None:
        """A screen is about to open: hold the keys typed until it is up (Navigate calls it)."""
        self._navigating += 1
        if self._key_timer is None:  # never hold keys for long, whatever went wrong
            self._key_timer = self.set_timer(HOLD_KEYS_S, self._release_keys)

    def _navigated(self) -> None:
        self._navigating = max(0, self._navigating - 1)
        if not self._navigating:
            self._release_keys()

    def _release_keys(self) -> None:
        self._navigating = 0
        if self._key_timer is not None:
            self._key_timer.stop()
            self._key_timer = None
        held, self._held_keys = self._held_keys, []
        for key in held:  # (fresh events: these were stopped when held)
            self.post_message(events.Key(key.key, key.character))

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            self.app_focus = True  # (as Textual's own on_event does for a key)
            if self._navigating or self._held_keys:
                self._held_keys.append(event)
                return
            # A bound key runs its action now, on the screen shown, as the key arrives: Textual
            # would hand it to the focused widget and run the binding once it bubbled back,
            # after the keys typed since had been handed to the same (maybe leaving) screen.
            # (The chain leaves out the keys an input consumes: those are typed, as always.)
            if await self._check_bindings(event.key, priority=True) or await self._check_bindings(
                event.key
            ):
                return
            self._key_screens[id(event)] = self.screen
            if len(self._key_screens) > 64:  # keys an input typed never come back
                del self._key_screens[next(iter(self._key_screens))]
        await super().on_event(event)

    async def _on_key(self, event: events.Key) -> None:
        # an unbound key that bubbled back after the screen changed: the screen it was typed
        # for is gone, and it is not run on the new one
        sent_to = self._key_screens.pop(id(event), None)
        # Textual calls the `_on_key` of every class in the app's MRO in turn, unless the event's
        # default is prevented: without this, App._on_key ran after the returns below anyway (a
        # key bubbling back while the app quits raised ScreenStackError; one typed for a screen
        # that is gone ran on the new one), and after super()._on_key a second time.
        event.prevent_default()
        try:
            screen = self.screen
        except ScreenStackError:  # shutting down
            return
        if sent_to is not None and sent_to is not screen:
            return
        await super()._on_key(event)
