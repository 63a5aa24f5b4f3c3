"""The Shell, and the thin front ends over it: the command line, the REPL, the notebook magic, the config file and the injected environment."""
