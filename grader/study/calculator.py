"""The memory calculator: a transformer's shape and parallel degrees in, bytes per device out, live.

The arithmetic is :func:`grader.memory.estimate`; this is only its widget.
"""

import ipywidgets as w

from ..memory import estimate


def _size(nbytes):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes} B"


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

    def number(name, value, lo, hi):  # the table follows every keystroke, not only Enter
        return w.BoundedIntText(value=start.get(name, value), min=lo, max=hi, continuous_update=True,
                                **look(name))

    def choice(name, options):
        return w.Dropdown(options=options, value=start.get(name, options[0]), **look(name))

    fields = {
        "layers": number("layers", 24, 1, 1024), "hidden": number("hidden", 1024, 8, 65536),
        "heads": number("heads", 16, 1, 512), "seq": number("seq", 1024, 1, 1 << 20),
        "batch": number("batch", 16, 1, 1 << 20), "micro_batches": number("micro_batches", 1, 1, 4096),
        "data": number("data", 1, 1, 65536), "pipeline": number("pipeline", 1, 1, 1024),
        "tensor": number("tensor", 1, 1, 512),
        "zero": choice("zero", [0, 1, 2, 3]), "precision": choice("precision", ["fp32", "mixed"]),
        "schedule": choice("schedule", ["1f1b", "gpipe"]),
        "checkpointing": w.Checkbox(value=start.get("checkpointing", False), description="checkpointing"),
    }
    device_gb = w.BoundedFloatText(value=start.get("device_gb", 80.0), min=0.001, max=1e6,
                                   continuous_update=True, **look("device GB"))
    table = w.HTML()

    def update(_=None):
        try:
            e = estimate(**{name: field.value for name, field in fields.items()})
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
        table.value = f"<p>{e['params']:,} parameters; bytes per device:</p><table>{rows}</table>{verdict}"

    for field in [*fields.values(), device_gb]:
        field.observe(update, names="value")
    update()
    boxes = list(fields.values()) + [device_gb]
    return w.VBox([w.HBox([w.VBox(boxes[i:i + 5]) for i in range(0, len(boxes), 5)]), table])
