"""Chrome/Perfetto JSON trace files: reading (`read_chrome_trace`, `read_chrome_table`),
writing (`write_chrome_trace`; `write_chrome_ranks`: a file per rank, as HTA reads a job), sizing (`estimate_chrome_bytes`) and the limits a read holds
to. The stable public name of ``recfn.formats.chrome``, where it lives."""

from recfn.formats.chrome import *  # noqa: F403
from recfn.formats.chrome import __all__ as __all__
