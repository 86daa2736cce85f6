"""The memory calculator: a transformer's shape and parallel degrees in, bytes per device out, live.

The arithmetic is :func:`grader.memory.estimate`; this is only its widget.
"""

import ipywidgets as w

from ..memory import estimate


def _size(nbytes):
    """Bytes in the largest unit that keeps the number at least 1.

    >>> _size(512), _size(13_730_000), _size(2_769_714_668_034.34e9)
    ('512 B', '13.73 MB', '2769.71 EB')
    """
    for unit, scale in (("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes:g} B"


# Each whole-number field's range: a value outside it is refused, with the range, never clamped.
RANGES = {"layers": (1, 1024), "hidden": (8, 65536), "heads": (1, 512), "seq": (1, 1 << 20), "batch": (1, 1 << 20),
          "micro_batches": (1, 4096), "data": (1, 65536), "pipeline": (1, 1024), "tensor": (1, 512)}
STARTS = {"layers": 24, "hidden": 1024, "heads": 16, "seq": 1024, "batch": 16, "micro_batches": 1, "data": 1,
          "pipeline": 1, "tensor": 1}


def _refused(values, device_gb):
    """Why the fields hold no shape to estimate, or None."""
    for name, (lo, hi) in RANGES.items():
        if not lo <= values[name] <= hi:
            return f"{name} must be a whole number from {lo:,} to {hi:,}, not {values[name]:,}"
    if not device_gb > 0:
        return f"device GB must be more than 0, not {device_gb:g}"
    return None


def _uneven(layers, pipeline):
    """What the table means when the layers do not split evenly over the pipeline's stages."""
    if layers % pipeline == 0:
        return ""
    small = layers // pipeline
    return (f"<p>{layers} layers do not split evenly over {pipeline} stages: they hold {small + 1} or {small} "
            f"layers. Parameters, gradients and optimizer state are an even share ({layers / pipeline:g} "
            f"layers' worth); activations are for a stage of {small + 1}.</p>")


def show_calculator(**start):
    """A widget: transformer shape, batch and parallel degrees in, :func:`grader.memory.estimate`'s bytes per device out.

    Keyword arguments set the starting values, for example ``show_calculator(layers=48, hidden=1600)``.
    The table says whether the total fits the device memory given in GB.

    >>> box = show_calculator(layers=4, hidden=64, heads=4, seq=64, batch=8)
    >>> "activations" in box.children[-1].value
    True
    """
    def look(name):
        return dict(description=name, layout=w.Layout(width="210px"), style={"description_width": "95px"})

    def number(name):  # the table follows every keystroke, not only Enter
        return w.IntText(value=start.get(name, STARTS[name]), continuous_update=True, **look(name))

    def choice(name, options):
        return w.Dropdown(options=options, value=start.get(name, options[0]), **look(name))

    fields = {
        **{name: number(name) for name in RANGES},
        "zero": choice("zero", [0, 1, 2, 3]), "precision": choice("precision", ["fp32", "mixed"]),
        "schedule": choice("schedule", ["1f1b", "gpipe"]),
        "checkpointing": w.Checkbox(value=start.get("checkpointing", False), description="checkpointing"),
    }
    device_gb = w.FloatText(value=start.get("device_gb", 80.0), continuous_update=True, **look("device GB"))
    table = w.HTML()

    def update(_=None):
        values = {name: field.value for name, field in fields.items()}
        try:
            refused = _refused(values, device_gb.value)
            if refused:
                raise ValueError(refused)
            e = estimate(**values)
        except ValueError as error:
            table.value = (f"<p style='color:#b71c1c'><b>Not a possible shape:</b> {error}.</p>")
            return
        fits = e["total"] <= device_gb.value * 1e9
        rows = "".join(f"<tr><td style='padding-right:14px'>{kind}</td>"
                       f"<td style='text-align:right'>{_size(e[kind])}</td></tr>"
                       for kind in ("parameters", "gradients", "optimizer", "activations", "total"))
        verdict = ("<p style='padding:4px 8px;border-radius:4px;display:inline-block;"
                   + ("background:#e8f5e9;color:#1b5e20'><b>Fits</b>" if fits else
                      "background:#ffebee;color:#b71c1c;font-size:115%'><b>Does not fit</b>")
                   + f" in {device_gb.value:g} GB per device</p>")
        table.value = (f"<p>{e['params']:,} parameters; bytes per device:</p><table>{rows}</table>"
                       f"{_uneven(values['layers'], values['pipeline'])}{verdict}")

    for field in [*fields.values(), device_gb]:
        field.observe(update, names="value")
    update()
    boxes = list(fields.values()) + [device_gb]
    return w.VBox([w.HBox([w.VBox(boxes[i:i + 5]) for i in range(0, len(boxes), 5)]), table])
