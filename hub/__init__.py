"""The course on a GPU JupyterHub: image, Helm values, nbgitpuller links and a smoke test.

- ``hub/Dockerfile``: the single-user image (a CUDA PyTorch notebook image, its torch kept).
- ``hub/config.yaml``: Zero to JupyterHub Helm values (1-GPU and 2-GPU profiles, /dev/shm,
  the nbgrader exchange).
- :mod:`hub.links`: nbgitpuller links that open the course and each lesson in JupyterLab.
- :mod:`hub.smoke`: checks a spawned pod (GPUs, NCCL, gloo, /dev/shm, the course, a lesson).
"""
