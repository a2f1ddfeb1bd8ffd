"""A dry run of releases: how many pods of a gang would fit once some placed pods are gone.

Contract (internal to the core): a :class:`ReleaseProbe` is made for one gang on one
:class:`~lattice.scheduler.core.placement.Cluster` and never changes that cluster. It starts
from :meth:`Cluster.fit_count` for each distinct demand of the gang (each node taken alone)
and the cluster's free totals. Its *scarce* demands are those with fewer pods fitting than the
gang has of them (all of them when none is short, or when it is made with ``every``); releases
only add room, so the others stay satisfied, each taken alone. :meth:`ReleaseProbe.add`
overlays the release of some placed pods (node, demand) and updates the totals and the scarce
demands' counts, on the touched nodes only.
:meth:`ReleaseProbe.enough` is a necessary condition for the gang to be placeable after those
releases: for every scarce demand as many pods fit as the gang has of it, and the totals hold
the gang's sum. :meth:`ReleaseProbe.usable` and :meth:`ReleaseProbe.fits_after` speak of the
scarce demands only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lattice.scheduler.core.model import PodDemand
from lattice.scheduler.core.placement import Cluster

__all__ = ["ReleaseProbe"]


class ReleaseProbe:
    """Fit counts of a gang's demands under an overlay of released pods (see the contract)."""

    __slots__ = (
        "_by_name",
        "_cluster",
        "_eligible",
        "_exclude",
        "_gain",
        "_lifted",
        "_need",
        "_pods_off",
        "_total",
        "_usable",
        "room",
        "scarce",
    )

    def __init__(
        self,
        cluster: Cluster,
        demands: Sequence[PodDemand],
        exclude: frozenset[int],
        *,
        every: bool = False,
    ) -> None:
        self._cluster = cluster
        self._exclude = exclude
        wanted: dict[PodDemand, int] = {}  # a Counter, in first-seen order (cheaper to build)
        for d in demands:
            wanted[d] = wanted.get(d, 0) + 1
        room = {d: cluster.fit_count(d, exclude) for d in wanted}
        short = {d: n for d, n in wanted.items() if room[d] < n}
        self.scarce: dict[PodDemand, int] = short if short and not every else dict(wanted)
        self.room = {d: room[d] for d in self.scarce}
        self._gain: dict[int, list[int]] = {}
        self._pods_off: dict[int, int] = {}
        self._lifted: set[int] = set()
        self._total = list(cluster.total)
        need: dict[int, int] = {}
        for d in demands:
            for k, q in cluster.vector(d):
                need[k] = need.get(k, 0) + q
        self._need = need
        self._usable: dict[int, bool] = {}
        self._by_name: dict[str, bool] = {"": False}
        self._eligible = {
            d: (*cluster.eligibility(d), cluster.vector(d), d.exclusive) for d in self.scarce
        }

    def classes(self) -> frozenset[int]:
        """The node classes a pod of a scarce demand may use, where some node could hold it
        were no Lattice pod on it."""
        c = self._cluster
        out: set[int] = set()
        for d, (classes, _, _, _) in self._eligible.items():
            out.update(cid for cid in classes if c.class_could_hold(cid, d))
        return frozenset(out)

    def usable(self, node: str) -> bool:
        """Whether a pod of a scarce demand may use ``node`` and would fit there were no
        Lattice pod on it (``""``: no node, never)."""
        hit = self._by_name.get(node)
        if hit is None:
            i = self._cluster.node_index.get(node)
            hit = self._by_name[node] = i is not None and self._usable_at(i)
        return hit

    def _usable_at(self, i: int) -> bool:
        hit = self._usable.get(i)
        if hit is None:
            c = self._cluster
            cid = c.class_of(i)
            hit = self._usable[i] = i not in self._exclude and any(
                cid in classes and (allowed is None or i in allowed) and c.could_hold(i, d)
                for d, (classes, allowed, _, _) in self._eligible.items()
            )
        return hit

    def _fits(self, i: int, d: PodDemand) -> int:
        c = self._cluster
        classes, allowed, vec, exclusive = self._eligible[d]
        if c.class_of(i) not in classes or (allowed is not None and i not in allowed):
            return 0
        if (c.excl[i] and i not in self._lifted) or (
            exclusive and c.count[i] - self._pods_off.get(i, 0) > 0
        ):
            return 0
        row, gain = c.free[i], self._gain.get(i)
        m = 1 << 62
        for k, q in vec:
            if k < 0:
                return 0
            free = row[k] + gain[k] if gain else row[k]
            if free < q:
                return 0
            m = min(m, free // q)
        return 1 if exclusive else m

    def add(self, pods: Iterable[tuple[str, PodDemand]]) -> None:
        """Overlay the release of ``pods`` (node, demand)."""
        c = self._cluster
        index, free, vector = c.node_index, c.free, c.vector
        total, room, gains = self._total, self.room, self._gain
        for node, d in pods:
            i = index.get(node)
            if i is None:
                continue
            usable = self._usable_at(i)
            before = [self._fits(i, e) for e in room] if usable else ()
            gain = gains.get(i)
            if gain is None:
                gain = gains[i] = [0] * len(c.resources)
            row = free[i]
            for k, q in vector(d):
                if k >= 0:
                    was = row[k] + gain[k]
                    gain[k] += q
                    total[k] += q if was >= 0 else max(0, was + q)
            if d.exclusive:
                self._lifted.add(i)
            self._pods_off[i] = self._pods_off.get(i, 0) + 1
            if usable:
                for e, was_fit in zip(room, before, strict=True):
                    room[e] += self._fits(i, e) - was_fit

    def fits_after(self, node: str) -> bool:
        """Whether a pod of a scarce demand fits on ``node`` under the overlay."""
        i = self._cluster.node_index.get(node)
        if i is None or not self._usable_at(i):
            return False
        return any(self._fits(i, d) > 0 for d in self.room)

    def enough(self) -> bool:
        """The necessary condition of the contract."""
        total = self._total
        if any(k < 0 or total[k] < q for k, q in self._need.items()):
            return False
        room = self.room
        return all(room[d] >= n for d, n in self.scarce.items())
