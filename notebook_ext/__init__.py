"""The IPython extension and the recfn command line."""
