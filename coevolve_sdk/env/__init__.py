"""Environments: the AgentEnv base, ToolEnv (tools as typed functions), rubrics and the tool-call text format."""
