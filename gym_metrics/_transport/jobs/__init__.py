"""JobService over the jobs domain: the job server (`serve_jobs`, `start_job_server`)."""

from gym_metrics._transport.jobs._serving import JobServerOptions, RunningJobServer, serve_jobs, start_job_server

__all__ = ["JobServerOptions", "RunningJobServer", "serve_jobs", "start_job_server"]
