"""What `ShardedSearcher` and `IndexSearcher` share: how their actors are declared (resources,
restarts, the CPU engine's threads) and how they are ended."""

import math

import ray


def actor_class(cls, *, num_cpus, num_gpus, max_restarts, scheduling_strategy):
    """`cls` as a Ray actor class with these resources. The CPU engine's threads follow the
    actor's CPUs, so actors on one node do not oversubscribe it (rayon's pool would otherwise
    take every core in each actor)."""
    threads = str(max(1, math.ceil(num_cpus)))
    return ray.remote(cls).options(
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        max_restarts=max_restarts,
        max_task_retries=0,
        scheduling_strategy=scheduling_strategy,
        runtime_env={"env_vars": {"RAYON_NUM_THREADS": threads}},
    )


class ActorGroup:
    """Actors ended together: by `close()`, or on leaving a `with` block."""

    actors: list

    def close(self):
        """End the actors (no restart)."""
        for a in getattr(self, "actors", []):
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
