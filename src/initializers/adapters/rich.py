"""rich's live block, erased over the rows its last frame takes on the terminal now, not the rows it took when drawn.

Most terminals (VTE, iTerm2, kitty, Windows Terminal, tmux) rewrap their lines when they shrink: a line drawn 100
columns wide takes three rows at 40, the cursor on the last. rich moves up by the lines it drew, leaving the rows above
on screen; this moves up by the rows each line takes at the console's width now. rich has no public way to change how
its block is erased (LiveRender and Live's hold of it are internals). Imported only when the view shows (rich with it).
"""

from __future__ import annotations

from typing import Any

from initializers.adapters import require

#: The releases these internals were read against; pyproject.toml pins the same range.
AT_LEAST, BELOW = "13", "16"
require("rich", AT_LEAST, BELOW)

from rich.console import Console, ConsoleOptions, RenderResult  # noqa: E402 - only once the release is known
from rich.control import Control  # noqa: E402
from rich.live import Live  # noqa: E402
from rich.live_render import LiveRender  # noqa: E402
from rich.segment import ControlType  # noqa: E402

_UP_AND_ERASE = ((ControlType.CURSOR_UP, 1), (ControlType.ERASE_IN_LINE, 2))


class RewrappingRender(LiveRender):
    """A LiveRender that keeps the width of each line it rendered, and erases by the rows they take now."""

    def __init__(self, renderable: Any, console: Console) -> None:
        super().__init__(renderable)
        self._console = console
        self._widths: list[int] = []

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = [0]
        for segment in super().__rich_console__(console, options):
            if segment.text == "\n" and not segment.control:
                widths.append(0)
            else:
                widths[-1] += segment.cell_length
            yield segment
        self._widths = widths

    def rows(self) -> int:
        """The rows the last frame takes at the console's width now (a line of no text still takes one)."""
        width = max(self._console.width, 1)
        return sum(max(1, -(-line // width)) for line in self._widths)

    def position_cursor(self) -> Control:
        """To the first row of the last frame, erasing each row on the way (from the last, where the cursor is)."""
        if self._shape is None:
            return Control()
        return Control(ControlType.CARRIAGE_RETURN, (ControlType.ERASE_IN_LINE, 2), *_UP_AND_ERASE * (self.rows() - 1))

    def restore_cursor(self) -> Control:
        """Every row of the last frame erased, from the row below it (where the cursor is once the block stops)."""
        if self._shape is None:
            return Control()
        return Control(ControlType.CARRIAGE_RETURN, *_UP_AND_ERASE * self.rows())


def rewrapping_live(console: Console, **options: Any) -> Live:
    """A rich Live block on `console` (`options` as Live takes them) whose redraws erase by `RewrappingRender`."""
    live = Live(console=console, **options)
    live._live_render = RewrappingRender(live._live_render.renderable, console)
    return live
