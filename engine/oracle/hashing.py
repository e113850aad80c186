"""Hashing the files a walk opened, in batches, by the walking thread and the hash worker
(hash_worker.py) side by side; reading one file is reading.py's."""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from engine.oracle import hash_worker
from engine.oracle.reading import hash_file


@dataclass(slots=True)
class HashJob:
    """One regular file to hash, open as `fd` (the job owns it and closes it once read).
    `st` is the descriptor's own stat, taken before reading: what the entry will say."""

    rel: str
    fd: int
    st: os.stat_result
    keep_text: bool  # at most TEXT_MAX: read whole, and keep the bytes when they look like text
    digest: str | None = None
    text: bytes | None = None


def _run(jobs: list[HashJob]) -> None:
    """Hash every job of a batch here; every descriptor is closed whatever happens."""
    error: OSError | None = None
    for job in jobs:
        try:
            if error is None:
                job.digest, job.text = hash_file(job.fd, job.st.st_size, job.keep_text)
        except OSError as exc:
            error = exc
        finally:
            os.close(job.fd)
    if error is not None:
        raise error


def _close(jobs: list[HashJob]) -> None:
    for job in jobs:
        os.close(job.fd)


# The second core, without the GIL: a worker process (hash_worker.py) beside the walking thread
# reads and hashes the batches it is handed, as open descriptors; the walk keeps every path and
# every open to itself. A batch goes to the worker while it has fewer than IN_FLIGHT of the
# walk's, else the walking thread hashes it at once (whoever is free does the work). Small files
# go there too: a thread could not take them (every os.read and hash handed the GIL between the
# two threads, which for a 20 KB file cost about what hashing it did: 2,000 such files took 13%
# longer), a process can. The full hash of 2,000 files / 40 MB in a container's merged folder
# (alternated runs, 2 cores, load 1.3-1.9, medians): 88 ms hashed by the walk alone, 68 / 59 /
# 54 / 55 ms with 1 / 2 / 3 / 4 batches in flight; the walk without any read took 37 ms. Results
# held back behind a batch with the worker are bounded by _AHEAD batches; the descriptors held,
# by IN_FLIGHT + 1 batches.
IN_FLIGHT = 3
_AHEAD = 8


class _Batch:
    __slots__ = ("jobs", "worker")

    def __init__(self, jobs: list[HashJob], worker: hash_worker.Worker | None) -> None:
        self.jobs = jobs
        # The worker hashing it (its descriptors still open here), None once hashed.
        self.worker = worker


class Hasher:
    """Hashes a walk's files in batches, in the walk's order: a batch goes to the worker process
    when it has room, else the walking thread hashes it at once (whoever is free does the work).
    A descriptor handed over stays open here until the reply: when the worker dies or hangs,
    its batches are hashed here from the start."""

    def __init__(self) -> None:
        self._batches: deque[_Batch] = deque()
        self._sent: deque[_Batch] = deque()  # with the worker, oldest first
        self._worker: hash_worker.Worker | None = None  # ours (its lock held) while _sent
        self._lost = False  # the worker died under this walk: the walk hashes alone from here

    def submit(self, jobs: list[HashJob], last: bool = False) -> None:
        """Hash `jobs` (now or on the worker). The last batch of a walk is shared with an idle
        worker: the first half goes there, the walk hashes the rest."""
        if not jobs:
            return
        try:
            self._take_replies()
            worker = self._worker or self._acquire()
        except BaseException:
            _close(jobs)  # never made the walk's: ours to close
            raise
        if (
            worker is None
            or len(self._sent) >= IN_FLIGHT
            or (last and self._sent)
            or len(jobs) > hash_worker.MAX_FDS
        ):
            if not self._sent:
                self._release()
            self._here(jobs)
            return
        if last:
            half = len(jobs) // 2
            jobs, rest = jobs[:half], jobs[half:]
        else:
            rest = []
        try:
            if jobs:
                batch = _Batch(jobs, worker)
                self._batches.append(batch)  # the walk's from here on: abandon closes them
                self._sent.append(batch)
                try:
                    worker.send(jobs)
                except hash_worker.WorkerGone:
                    self._lose()
        finally:
            if not self._sent:
                self._release()
            if rest:
                self._here(rest)

    def _acquire(self) -> hash_worker.Worker | None:
        worker = None if self._lost else hash_worker.get()
        if worker is None or not worker.lock.acquire(blocking=False):
            return None  # none, or busy with another walk's batches
        self._worker = worker
        return worker

    def _release(self) -> None:
        if self._worker is not None:
            worker, self._worker = self._worker, None
            worker.lock.release()

    def _take_replies(self) -> None:
        """Every reply the worker has sent by now (the walk's own batches being hashed)."""
        while self._sent and self._worker is not None and self._worker.ready():
            self._receive()

    def _here(self, jobs: list[HashJob]) -> None:
        self._batches.append(_Batch(jobs, None))
        _run(jobs)

    def _receive(self, hash_again: bool = True) -> None:
        """The worker's reply to its oldest batch, waited for; our descriptors of it closed."""
        batch = self._sent[0]
        worker = batch.worker
        assert worker is not None
        try:
            error = worker.receive(batch.jobs)
        except hash_worker.WorkerGone:
            self._lose(hash_again)
            return
        except BaseException:  # interrupted mid-reply: the stream is out of step, end it
            self._lose(hash_again=False)
            raise
        batch.worker = None
        self._sent.popleft()
        if not self._sent:
            self._release()
        _close(batch.jobs)
        if error is not None:
            raise error

    def _lose(self, hash_again: bool = True) -> None:
        """The worker died, hung or garbled a reply: end it, and hash its batches here (our own
        descriptors of them are still open, and every read is at explicit offsets)."""
        lost, self._sent = self._sent, deque()
        self._lost = True
        for batch in lost:
            batch.worker = None
        try:
            if self._worker is not None:
                hash_worker.lost(self._worker)
        finally:
            self._release()
            error: BaseException | None = None
            for batch in lost:
                try:
                    if hash_again and error is None:
                        _run(batch.jobs)
                    else:
                        _close(batch.jobs)
                except OSError as exc:
                    error = exc
            if error is not None:
                raise error

    def done(self, wait: bool = False) -> Iterator[HashJob]:
        """The hashed jobs, in submission order: those ready now, or (`wait`) all of them. The
        results held back behind a batch with the worker are bounded: past _AHEAD batches, its
        reply is waited for."""
        while self._batches:
            batch = self._batches[0]
            if batch.worker is not None:
                self._take_replies()
                if batch.worker is not None:
                    if not wait and len(self._batches) <= _AHEAD:
                        return
                    while batch.worker is not None:
                        self._receive()
            self._batches.popleft()
            yield from batch.jobs

    def abandon(self) -> None:
        """After a failed walk: every descriptor still held is closed (the worker's replies to
        the batches it holds are read first, so that the next walk finds it idle)."""
        self._batches.clear()  # the descriptors of those not with the worker are closed already
        while self._sent:
            with contextlib.suppress(Exception):
                self._receive(hash_again=False)  # its error is the walk's, or beside it
