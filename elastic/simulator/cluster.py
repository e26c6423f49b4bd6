"""Core accounting of one partition of ``nodes`` x ``cores_per_node`` cores (like Slurm's CR_Core).

A cores request may spread over any nodes, so it fits whenever enough cores are free in total. A
nodes request takes whole idle nodes. With one core per node both are the same and only the free-core
counter is kept (the fast path used for trace replay); with several cores per node every node's free
cores are tracked and cores requests are packed best-fit onto partly used nodes first, keeping whole
nodes idle for nodes requests.
"""

from __future__ import annotations

from elastic.errors import ConfigError

__all__ = ["Cluster"]


class Cluster:
    """Free cores of one partition.

    Parameters
    ----------
    nodes : int
        Number of nodes, >= 1.
    cores_per_node : int, default 1
        Cores per node, >= 1.

    Attributes
    ----------
    total : int
        Cores of the partition.
    free : int
        Cores free now.
    per_node : bool
        Whether nodes are tracked one by one (``cores_per_node > 1``).
    idle_nodes : int
        Nodes with every core free (only maintained when ``per_node``; else equals ``free``).

    Examples
    --------
    >>> c = Cluster(2, 4)
    >>> c.allocate(0, 3, 0); c.allocate(1, 0, 1)
    >>> c.free, c.idle_nodes
    (1, 0)
    >>> c.release(0, 3); c.idle_nodes
    1
    """

    __slots__ = (
        "_placement",
        "cores_per_node",
        "free",
        "idle_nodes",
        "node_free",
        "nodes",
        "per_node",
        "total",
    )

    def __init__(self, nodes: int, cores_per_node: int = 1) -> None:
        if nodes < 1:
            raise ConfigError(f"Cluster nodes must be >= 1, got {nodes}")
        if cores_per_node < 1:
            raise ConfigError(f"Cluster cores_per_node must be >= 1, got {cores_per_node}")
        self.nodes = nodes
        self.cores_per_node = cores_per_node
        self.total = nodes * cores_per_node
        self.free = self.total
        self.per_node = cores_per_node > 1
        self.idle_nodes = nodes if self.per_node else self.total
        self.node_free = [cores_per_node] * nodes if self.per_node else []
        self._placement: dict[int, list[tuple[int, int]]] = {}

    def fits(self, cores: int, whole: int) -> bool:
        """Whether a job of ``cores`` cores (``whole`` whole nodes, or 0) can start now."""
        return cores <= self.free and (not whole or self.idle_nodes >= whole)

    def allocate(self, job: int, cores: int, whole: int) -> None:
        """Take ``cores`` cores (or ``whole`` idle nodes) for ``job``; the caller checked :meth:`fits`."""
        if not self.per_node:
            self.free -= cores
            return
        cpn = self.cores_per_node
        node_free = self.node_free
        placed: list[tuple[int, int]] = []
        if whole:
            for n in range(self.nodes):
                if node_free[n] == cpn:
                    node_free[n] = 0
                    placed.append((n, cpn))
                    if len(placed) == whole:
                        break
            self.idle_nodes -= whole
            self.free -= whole * cpn
        else:
            left = cores
            # Best fit: fill the fullest partly used nodes first, idle nodes last.
            # O(nodes) per start; only multi-core partitions (small mock clusters) come here.
            order = sorted((f, n) for n, f in enumerate(node_free) if f > 0)
            for f, n in order:
                take = f if f < left else left
                if f == cpn:
                    self.idle_nodes -= 1
                node_free[n] = f - take
                placed.append((n, take))
                left -= take
                if not left:
                    break
            if left:
                raise RuntimeError(f"invariant broken: job {job} placed with {left} cores missing")
            self.free -= cores
        self._placement[job] = placed

    def release(self, job: int, cores: int) -> None:
        """Give back the cores of ``job`` (which holds ``cores`` cores)."""
        self.free += cores
        if not self.per_node:
            return
        cpn = self.cores_per_node
        node_free = self.node_free
        for n, c in self._placement.pop(job):
            node_free[n] += c
            if node_free[n] == cpn:
                self.idle_nodes += 1

    def placement(self, job: int) -> list[tuple[int, int]]:
        """``(node, cores)`` pairs held by a running job (empty with one core per node)."""
        return list(self._placement.get(job, ()))
