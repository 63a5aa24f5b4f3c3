"""The backends: the contract (base.py), the simulator (sim/) and the GPU (cuda.py, its worker, gpu/); choice.py picks
one. Nothing is imported here: the `cudashell` command imports prestart.py before anything else, to start the GPU
worker beside the shell's own imports."""
