"""The only package that imports grpc, in three faces that never import each other upward.

- `client/`: what collector, evaluation, sdk and testing call (ResourcesClient, JobClient);
  it knows no domain above the row vocabulary.
- `server/`: the ResourcesService servicer (convert, call the environment, convert back), the
  shared server bootstrap (auth, TLS, health, reflection, access logs, metrics) and `serve()`.
- `jobs/`: JobService over the jobs domain, on the server bootstrap.

The modules directly in this folder are the wire records both sides share (packed columns,
batches, aggregate parts, job specs, tracing). Import a face's `__init__`, never its private
modules.
"""
