"""Lowering: the graph passes that both task extraction and compilation run, and the tasks and design spaces.

:mod:`~tunewise.lowering.graph` runs the passes (with :mod:`~tunewise.lowering.winograd`,
:mod:`~tunewise.lowering.concat`, :mod:`~tunewise.lowering.transcendentals`,
:mod:`~tunewise.lowering.transposes`, :mod:`~tunewise.lowering.depthwise` and
:mod:`~tunewise.lowering.broadcasts`);
:mod:`~tunewise.lowering.tasks` extracts the tunable tasks; :mod:`~tunewise.lowering.spaces` and
:mod:`~tunewise.lowering.default_schedules` say what is searched and what runs untuned;
:mod:`~tunewise.lowering.amx` holds the tensor intrinsic of bfloat16 products on AMX tiles.
"""
