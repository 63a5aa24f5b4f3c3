"""Stream order as the session's commands establish it, to find what compute-sanitizer calls a stream-ordered race:
memory from `alloc … async` used on another stream before the allocation is ordered before the use, or freed by
`free … async` on a stream not ordered after work still using it on another. Order comes from the stream itself,
the legacy default stream's implicit synchronisation (a blocking stream and its context's default stream wait for
each other's earlier work), events (`event record` then `wait`), and the host's waits (`sync`, `event sync`): what
the host waited for is ordered before everything issued after. Indices are the session's count of traced
operations (`Session.traced`). Timing plays no part: a race is one whether or not the work happened to finish in
time, as the sanitizer judges it — and the command still runs, as it does on a GPU."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StreamOrder:
    after: dict = field(default_factory=dict)  # stream name → {stream name: last index there it is ordered after}
    events: dict = field(default_factory=dict)  # event name → what a stream waiting for it is ordered after
    host: dict = field(default_factory=dict)  # stream name → last index of it the host waited for
    host_all: int = -1  # every operation up to this index: the host waited for the device

    def recorded(self, event: str, stream: str, index: int) -> None:
        self.events[event] = {**self.after.get(stream, {}), stream: index}

    def waited(self, stream: str, event: str) -> None:
        mine = self.after.setdefault(stream, {})
        for s, i in self.events.get(event, {}).items():
            mine[s] = max(mine.get(s, -1), i)

    def host_waited(self, index: int, stream: str | None = None, event: str | None = None) -> None:
        """The host waited for one stream's work, an event's, or (neither named) the whole device's."""
        if event is not None:
            for s, i in self.events.get(event, {}).items():
                self.host[s] = max(self.host.get(s, -1), i)
        elif stream is not None:
            self.host[stream] = index
        else:
            self.host_all = index

    def ordered(self, first, index: int, then) -> bool:
        """Whether work issued now on stream `then` is ordered after operation `index` of stream `first` (Streams)."""
        if first is then or index <= self.host_all or index <= self.host.get(first.name, -1):
            return True
        if first.context == then.context and (first.is_default and not then.nonblocking
                                              or then.is_default and not first.nonblocking):
            return True
        return index <= self.after.get(then.name, {}).get(first.name, -1)
