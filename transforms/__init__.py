"""Pure, deterministic, I/O-free logic: values and Polars frames in, values and frames out."""
