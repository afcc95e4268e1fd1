"""The engine-neutral device programs: the GPU engines' contract beside the ``Engine``
interface (engines/interface.py). Each is the steps of one call on data in device
memory, written once over the operations an engine supplies on its spans of memory:

* ``device_runs.py``: one ECB or CTR call (``run_blocks`` over an engine's ``launch``,
  ``scratch`` and ``copy``);
* ``device_chunks.py``: any run of the chunked format's chunks (``ChunkKernels``);
* ``device_gcm.py``: one GCM message's calls (``DeviceGcm``: ``crypt``,
  ``partial_sum``, ``read``);
* ``staged_gcm.py``: the same calls on host data staged through a device, each call one
  pass (``StagedGcm``: the engine's ``_through``, how a call's whole blocks go through
  its device).

A GPU engine answers only how it launches: its kernel set over spans (the OpenCL
engine's ``workers.OpenclChunkKernels``, the CUDA engine's ``workers.CudaChunkKernels``).
The programs import no engine package.
"""
