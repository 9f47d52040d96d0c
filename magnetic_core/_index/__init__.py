"""Where a group is formed: the two-level index of cells under concept centroids.

``index.HierIndex`` holds the vectors and the groups (``group.Group``: one group's block and
sum), ``assign`` files a chunk of new cells under the centroids by driving the compiled loop
in ``kernels``, ``calibration.Calibration`` fits the join threshold to the data,
``clustering`` splits an oversized group by 2-means, ``vectors`` scales rows to unit length.
Private: import from :mod:`magnetic_core` instead.
"""
