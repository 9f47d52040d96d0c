"""Where a group is formed: the two-level index of cells under concept centroids.

``index.HierIndex`` holds the vectors and the groups, ``calibration.Calibration`` fits the join
threshold to the data, ``clustering`` splits an oversized group by 2-means. Private: import from
:mod:`magnetic_core` instead.
"""
