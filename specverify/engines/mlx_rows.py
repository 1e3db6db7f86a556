"""placeholder"""

MLX_ROWS = []
