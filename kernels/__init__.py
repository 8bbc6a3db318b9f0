"""jaxkit.kernels: the functional core. Pure, jit/vmap-able functions and their state
pytrees; no I/O, no printing, no imports from the rest of jaxkit."""
