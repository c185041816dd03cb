"""What both GPU flows share: which flow a GPU build takes, engine limits sized for the GPU, and the GPU memory
arithmetic."""
