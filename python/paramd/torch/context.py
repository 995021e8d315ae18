"""The process's place in a paramd job: init() joins it as one worker rank
and returns its Context; the rest of paramd.torch finds it with _current().
"""

import os

from .. import _native

# Where init() looks for the rank when not given one, in order: paramctl
# (and by hand), Slurm's srun, a Kubernetes Indexed Job.
RANK_VARIABLES = ("PARAMD_RANK", "SLURM_PROCID", "JOB_COMPLETION_INDEX")

_context = None


class Context:
    """The process's place in the job: what init() returns."""

    def __init__(self, worker):
        self.worker = worker
        self.sent_initial_values = False

    @property
    def rank(self):
        return self.worker.rank

    @property
    def workers(self):
        return self.worker.workers

    @property
    def servers(self):
        return self.worker.servers

    @property
    def policy(self):
        return self.worker.policy

    @property
    def batch_size(self):
        return self.worker.batch_size

    @property
    def epochs(self):
        return self.worker.epochs

    @property
    def seed(self):
        return self.worker.seed

    @property
    def job_id(self):
        return self.worker.job_id

    @property
    def data(self):
        """The job's data section: train_images, train_labels, test_images,
        test_labels (absolute paths), train_limit, test_limit (0: all) and
        training.shuffle."""
        return self.worker.data


def _env_rank():
    for name in RANK_VARIABLES:
        value = os.environ.get(name, "")
        if value != "":
            try:
                return int(value)
            except ValueError:
                raise ValueError(f"{name}: expected a rank, got '{value}'")
    return None


def init(job=None, rank=None, servers=None, launch=None, log_level=None,
         backups=None):
    """Joins the job as one worker rank and returns its Context.

    job: the job file (default: $PARAMD_JOB). rank: default from
    $PARAMD_RANK, $SLURM_PROCID or $JOB_COMPLETION_INDEX. servers: a list
    of "host:port" overriding cluster.servers (default: $PARAMD_SERVERS,
    comma-separated, as paramctl sets it). launch: paramctl run's launch id
    ($PARAMD_LAUNCH). log_level: the native client's (default: warn).
    backups: with replication.factor 2, a list of "host:port" overriding
    replication.backups (default: $PARAMD_BACKUPS); a shard whose primary
    does not serve is called at its backup.
    """
    global _context
    job = job if job is not None else os.environ.get("PARAMD_JOB", "")
    if not job:
        raise ValueError("job: give init(job=...) or set PARAMD_JOB")
    if rank is None:
        rank = _env_rank()
    if rank is None:
        raise ValueError(
            "rank: give init(rank=...) or set one of " + ", ".join(RANK_VARIABLES))
    if servers is None:
        servers = [s for s in os.environ.get("PARAMD_SERVERS", "").split(",") if s]
    if backups is None:
        backups = [s for s in os.environ.get("PARAMD_BACKUPS", "").split(",") if s]
    if launch is None:
        launch = os.environ.get("PARAMD_LAUNCH", "")
    _native.init_logging(f"paramd-torch rank {rank}",
                         log_level or os.environ.get("PARAMD_LOG_LEVEL", "warn"))
    if _context is not None:
        _context.worker.finish()
    _context = Context(_native.Worker(job, int(rank), list(servers), launch,
                                      list(backups)))
    return _context


def _current(context=None):
    """`context`, else the one init() made, else init()'s from the
    environment paramctl run gives a worker ($PARAMD_JOB, $PARAMD_RANK,
    ...)."""
    if context is not None:
        return context
    return _context if _context is not None else init()
