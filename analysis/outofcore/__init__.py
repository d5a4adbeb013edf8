"""Summaries of traces too large for memory: ``files`` summarises Parquet files and dataset
folders one process at a time (``recfn summary``, ``Trace.summary()`` of a lazy trace), and
``dask_accessor`` gives Dask DataFrames the ``ddf.recfn`` accessor."""
