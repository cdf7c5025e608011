"""Writing a plugin: ``check_env`` (every contract an environment must keep, run on the real
environment) and the scaffold behind ``coevolve new env``. It sits above ``env`` and
``evolution`` because the contract check also explores and validates tasks as a run would."""
