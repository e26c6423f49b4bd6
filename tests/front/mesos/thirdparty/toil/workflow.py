"""A small Toil workflow (ours, for the tests): two jobs, a follow-on joining their results; prints it."""

from toil.common import Toil
from toil.job import Job


def hello(job, name):
    return f"hello {name}"


def join(job, *parts):
    return " + ".join(parts)


def top(job):
    a = job.addChildJobFn(hello, "a")
    b = job.addChildJobFn(hello, "b")
    return job.addFollowOnJobFn(join, a.rv(), b.rv()).rv()


if __name__ == "__main__":
    options = Job.Runner.getDefaultArgumentParser().parse_args()
    with Toil(options) as toil:
        print("RESULT", toil.start(Job.wrapJobFn(top)))
