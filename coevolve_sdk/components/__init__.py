"""The component machinery: the base class every component shares, the run context, the plugin registry and its hooks."""
